"""Robot-side client for the L3P planning service, and the MuJoCo runner and evaluator on top of it.

The robot library (``l3p.clients.client``: ``errors``, ``messages``, ``episodes``) needs only
grpcio, protobuf and numpy; ``runner`` and ``evaluate`` add gymnasium-robotics and mujoco
(``pip install '.[sim]'``). Import the public API from ``l3p.clients.client``.
"""
