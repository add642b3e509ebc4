from l3p_interfaces.action._reach_goal import ReachGoal  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Event  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Request  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_GetResult_Response  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_SendGoal_Event  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_SendGoal_Request  # noqa: F401
from l3p_interfaces.action._reach_goal import ReachGoal_SendGoal_Response  # noqa: F401
