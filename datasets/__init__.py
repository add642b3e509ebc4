"""Dataset sources: recordings in the formats robot teams use, read into the project's dataset
(`l3p.core.dataset`) for offline training, and the streaming writer the ROS 2 recorders use.

One reader per format behind one interface (`l3p.datasets.source`): the project's ``.npz``,
rosbag2 bags (MCAP or sqlite3, via ``rosbags``), LeRobot v3 (parquet, via ``pyarrow``) and Minari
(HDF5, via ``h5py``); a mapping file (`l3p.datasets.mapping`) says which topic or column is which.
Each format's library is imported only when that format is read: the ``[datasets]`` extra brings
them. No torch, no simulator, no ROS client library here: training and the ROS 2 recorders stand on
this package, the server never does.
"""
