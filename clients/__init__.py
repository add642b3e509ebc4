"""Robot-side client for the L3P planning service, and the MuJoCo Fetch runner and evaluator.

``clients.client`` needs only grpcio, protobuf and numpy; ``runner``, ``evaluate`` and ``demo``
add gymnasium-robotics and mujoco (``pip install .[sim]``).
"""
