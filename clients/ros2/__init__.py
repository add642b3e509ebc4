"""The ROS 2 bridge (``l3p ros2 bridge``) and a simulated ROS 2 robot (``l3p ros2 sim``).

Needs rclpy and the ROS message packages: the ``[ros2]`` extra (community wheels of ROS 2 Kilted)
or a sourced ROS 2 install. The robot library (``l3p.clients.client``) never imports this package.
"""
