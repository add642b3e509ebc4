# generated from rosidl_generator_py/resource/_idl.py.em
# with input from l3p_interfaces:action/ReachGoal.idl
# generated code does not contain a copyright notice

# This is being done at the module level and not on the instance level to avoid looking
# for the same variable multiple times on each instance. This variable is not supposed to
# change during runtime so it makes sense to only look for it once.
from os import getenv

ros_python_check_fields = getenv('ROS_PYTHON_CHECK_FIELDS', default='')


# Import statements for member types

# Member 'goal'
import array  # noqa: E402, I100

import builtins  # noqa: E402, I100

import math  # noqa: E402, I100

import rosidl_parser.definition  # noqa: E402, I100


class Metaclass_ReachGoal_GetResult(type):
    """Metaclass of service 'ReachGoal_GetResult'."""

    _TYPE_SUPPORT = None

    @classmethod
    def __import_type_support__(cls):
        try:
            from rosidl_generator_py import import_type_support
            module = import_type_support('l3p_interfaces')
        except ImportError:
            import logging
            import traceback
            logger = logging.getLogger(
                'l3p_interfaces.action.ReachGoal_GetResult')
            logger.debug(
                'Failed to import needed modules for type support:\n' +
                traceback.format_exc())
        else:
            cls._TYPE_SUPPORT = module.type_support_srv__action__reach_goal__get_result

            from l3p_interfaces.action import _reach_goal
            if _reach_goal.Metaclass_ReachGoal_GetResult_Request._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_GetResult_Request.__import_type_support__()
            if _reach_goal.Metaclass_ReachGoal_GetResult_Response._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_GetResult_Response.__import_type_support__()
            if _reach_goal.Metaclass_ReachGoal_GetResult_Event._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_GetResult_Event.__import_type_support__()


class ReachGoal_GetResult(metaclass=Metaclass_ReachGoal_GetResult):
    from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Request as Request
    from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Response as Response
    from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Event as Event

    def __init__(self):
        raise NotImplementedError('Service classes can not be instantiated')


# Import statements for member types

# already imported above
# import builtins

# already imported above
# import rosidl_parser.definition
