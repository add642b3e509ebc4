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


from l3p_interfaces.action._reach_goal_goal import Metaclass_ReachGoal_Goal, ReachGoal_Goal  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_result import Metaclass_ReachGoal_Result, ReachGoal_Result  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_feedback import Metaclass_ReachGoal_Feedback, ReachGoal_Feedback  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_send_goal_request import Metaclass_ReachGoal_SendGoal_Request, ReachGoal_SendGoal_Request  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_send_goal_response import Metaclass_ReachGoal_SendGoal_Response, ReachGoal_SendGoal_Response  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_send_goal_event import Metaclass_ReachGoal_SendGoal_Event, ReachGoal_SendGoal_Event  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_send_goal import Metaclass_ReachGoal_SendGoal, ReachGoal_SendGoal  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_get_result_request import Metaclass_ReachGoal_GetResult_Request, ReachGoal_GetResult_Request  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_get_result_response import Metaclass_ReachGoal_GetResult_Response, ReachGoal_GetResult_Response  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_get_result_event import Metaclass_ReachGoal_GetResult_Event, ReachGoal_GetResult_Event  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_get_result import Metaclass_ReachGoal_GetResult, ReachGoal_GetResult  # noqa: E402, F401
from l3p_interfaces.action._reach_goal_feedback_message import Metaclass_ReachGoal_FeedbackMessage, ReachGoal_FeedbackMessage  # noqa: E402, F401


class Metaclass_ReachGoal(type):
    """Metaclass of action 'ReachGoal'."""

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
                'l3p_interfaces.action.ReachGoal')
            logger.debug(
                'Failed to import needed modules for type support:\n' +
                traceback.format_exc())
        else:
            cls._TYPE_SUPPORT = module.type_support_action__action__reach_goal

            from action_msgs.msg import _goal_status_array
            if _goal_status_array.Metaclass_GoalStatusArray._TYPE_SUPPORT is None:
                _goal_status_array.Metaclass_GoalStatusArray.__import_type_support__()
            from action_msgs.srv import _cancel_goal
            if _cancel_goal.Metaclass_CancelGoal._TYPE_SUPPORT is None:
                _cancel_goal.Metaclass_CancelGoal.__import_type_support__()

            from l3p_interfaces.action import _reach_goal
            if _reach_goal.Metaclass_ReachGoal_SendGoal._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_SendGoal.__import_type_support__()
            if _reach_goal.Metaclass_ReachGoal_GetResult._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_GetResult.__import_type_support__()
            if _reach_goal.Metaclass_ReachGoal_FeedbackMessage._TYPE_SUPPORT is None:
                _reach_goal.Metaclass_ReachGoal_FeedbackMessage.__import_type_support__()


class ReachGoal(metaclass=Metaclass_ReachGoal):

    # The goal message defined in the action definition.
    from l3p_interfaces.action._reach_goal import ReachGoal_Goal as Goal
    # The result message defined in the action definition.
    from l3p_interfaces.action._reach_goal import ReachGoal_Result as Result
    # The feedback message defined in the action definition.
    from l3p_interfaces.action._reach_goal import ReachGoal_Feedback as Feedback

    class Impl:

        # The send_goal service using a wrapped version of the goal message as a request.
        from l3p_interfaces.action._reach_goal import ReachGoal_SendGoal as SendGoalService
        # The get_result service using a wrapped version of the result message as a response.
        from l3p_interfaces.action._reach_goal import ReachGoal_GetResult as GetResultService
        # The feedback message with generic fields which wraps the feedback message.
        from l3p_interfaces.action._reach_goal import ReachGoal_FeedbackMessage as FeedbackMessage

        # The generic service to cancel a goal.
        from action_msgs.srv._cancel_goal import CancelGoal as CancelGoalService
        # The generic message for get the status of a goal.
        from action_msgs.msg._goal_status_array import GoalStatusArray as GoalStatusMessage

    def __init__(self):
        raise NotImplementedError('Action classes can not be instantiated')
