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


class Metaclass_ReachGoal_Result(type):
    """Metaclass of message 'ReachGoal_Result'."""

    _CREATE_ROS_MESSAGE = None
    _CONVERT_FROM_PY = None
    _CONVERT_TO_PY = None
    _DESTROY_ROS_MESSAGE = None
    _TYPE_SUPPORT = None

    __constants = {
        'REACHED': 0,
        'TIMED_OUT': 1,
        'CANCELED': 2,
        'PREEMPTED': 3,
        'FAILED': 4,
    }

    @classmethod
    def __import_type_support__(cls):
        try:
            from rosidl_generator_py import import_type_support
            module = import_type_support('l3p_interfaces')
        except ImportError:
            import logging
            import traceback
            logger = logging.getLogger(
                'l3p_interfaces.action.ReachGoal_Result')
            logger.debug(
                'Failed to import needed modules for type support:\n' +
                traceback.format_exc())
        else:
            cls._CREATE_ROS_MESSAGE = module.create_ros_message_msg__action__reach_goal__result
            cls._CONVERT_FROM_PY = module.convert_from_py_msg__action__reach_goal__result
            cls._CONVERT_TO_PY = module.convert_to_py_msg__action__reach_goal__result
            cls._TYPE_SUPPORT = module.type_support_msg__action__reach_goal__result
            cls._DESTROY_ROS_MESSAGE = module.destroy_ros_message_msg__action__reach_goal__result

    @classmethod
    def __prepare__(cls, name, bases, **kwargs):
        # list constant names here so that they appear in the help text of
        # the message class under "Data and other attributes defined here:"
        # as well as populate each message instance
        return {
            'REACHED': cls.__constants['REACHED'],
            'TIMED_OUT': cls.__constants['TIMED_OUT'],
            'CANCELED': cls.__constants['CANCELED'],
            'PREEMPTED': cls.__constants['PREEMPTED'],
            'FAILED': cls.__constants['FAILED'],
        }

    @property
    def REACHED(self):
        """Message constant 'REACHED'."""
        return Metaclass_ReachGoal_Result.__constants['REACHED']

    @property
    def TIMED_OUT(self):
        """Message constant 'TIMED_OUT'."""
        return Metaclass_ReachGoal_Result.__constants['TIMED_OUT']

    @property
    def CANCELED(self):
        """Message constant 'CANCELED'."""
        return Metaclass_ReachGoal_Result.__constants['CANCELED']

    @property
    def PREEMPTED(self):
        """Message constant 'PREEMPTED'."""
        return Metaclass_ReachGoal_Result.__constants['PREEMPTED']

    @property
    def FAILED(self):
        """Message constant 'FAILED'."""
        return Metaclass_ReachGoal_Result.__constants['FAILED']


class ReachGoal_Result(metaclass=Metaclass_ReachGoal_Result):
    """
    Message class 'ReachGoal_Result'.

    Constants:
      REACHED
      TIMED_OUT
      CANCELED
      PREEMPTED
      FAILED
    """

    __slots__ = [
        '_outcome',
        '_message',
        '_final_distance',
        '_steps',
        '_check_fields',
    ]

    _fields_and_field_types = {
        'outcome': 'uint8',
        'message': 'string',
        'final_distance': 'double',
        'steps': 'uint32',
    }

    # This attribute is used to store an rosidl_parser.definition variable
    # related to the data type of each of the components the message.
    SLOT_TYPES = (
        rosidl_parser.definition.BasicType('uint8'),  # noqa: E501
        rosidl_parser.definition.UnboundedString(),  # noqa: E501
        rosidl_parser.definition.BasicType('double'),  # noqa: E501
        rosidl_parser.definition.BasicType('uint32'),  # noqa: E501
    )

    def __init__(self, **kwargs):
        if 'check_fields' in kwargs:
            self._check_fields = kwargs['check_fields']
        else:
            self._check_fields = ros_python_check_fields == '1'
        if self._check_fields:
            assert all('_' + key in self.__slots__ for key in kwargs.keys()), \
                'Invalid arguments passed to constructor: %s' % \
                ', '.join(sorted(k for k in kwargs.keys() if '_' + k not in self.__slots__))
        self.outcome = kwargs.get('outcome', int())
        self.message = kwargs.get('message', str())
        self.final_distance = kwargs.get('final_distance', float())
        self.steps = kwargs.get('steps', int())

    def __repr__(self):
        typename = self.__class__.__module__.split('.')
        typename.pop()
        typename.append(self.__class__.__name__)
        args = []
        for s, t in zip(self.get_fields_and_field_types().keys(), self.SLOT_TYPES):
            field = getattr(self, s)
            fieldstr = repr(field)
            # We use Python array type for fields that can be directly stored
            # in them, and "normal" sequences for everything else.  If it is
            # a type that we store in an array, strip off the 'array' portion.
            if (
                isinstance(t, rosidl_parser.definition.AbstractSequence) and
                isinstance(t.value_type, rosidl_parser.definition.BasicType) and
                t.value_type.typename in ['float', 'double', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64']
            ):
                if len(field) == 0:
                    fieldstr = '[]'
                else:
                    if self._check_fields:
                        assert fieldstr.startswith('array(')
                    prefix = "array('X', "
                    suffix = ')'
                    fieldstr = fieldstr[len(prefix):-len(suffix)]
            args.append(s + '=' + fieldstr)
        return '%s(%s)' % ('.'.join(typename), ', '.join(args))

    def __eq__(self, other):
        if not isinstance(other, self.__class__):
            return False
        if self.outcome != other.outcome:
            return False
        if self.message != other.message:
            return False
        if self.final_distance != other.final_distance:
            return False
        if self.steps != other.steps:
            return False
        return True

    @classmethod
    def get_fields_and_field_types(cls):
        from copy import copy
        return copy(cls._fields_and_field_types)

    @builtins.property
    def outcome(self):
        """Message field 'outcome'."""
        return self._outcome

    @outcome.setter
    def outcome(self, value):
        if self._check_fields:
            assert \
                isinstance(value, int), \
                "The 'outcome' field must be of type 'int'"
            assert value >= 0 and value < 256, \
                "The 'outcome' field must be an unsigned integer in [0, 255]"
        self._outcome = value

    @builtins.property
    def message(self):
        """Message field 'message'."""
        return self._message

    @message.setter
    def message(self, value):
        if self._check_fields:
            assert \
                isinstance(value, str), \
                "The 'message' field must be of type 'str'"
        self._message = value

    @builtins.property
    def final_distance(self):
        """Message field 'final_distance'."""
        return self._final_distance

    @final_distance.setter
    def final_distance(self, value):
        if self._check_fields:
            assert \
                isinstance(value, float), \
                "The 'final_distance' field must be of type 'float'"
            assert not (value < -1.7976931348623157e+308 or value > 1.7976931348623157e+308) or math.isinf(value), \
                "The 'final_distance' field must be a double in [-1.7976931348623157e+308, 1.7976931348623157e+308]"
        self._final_distance = value

    @builtins.property
    def steps(self):
        """Message field 'steps'."""
        return self._steps

    @steps.setter
    def steps(self, value):
        if self._check_fields:
            assert \
                isinstance(value, int), \
                "The 'steps' field must be of type 'int'"
            assert value >= 0 and value < 4294967296, \
                "The 'steps' field must be an unsigned integer in [0, 4294967295]"
        self._steps = value


# Import statements for member types

# Member 'subgoal'
# already imported above
# import array

# already imported above
# import builtins

# already imported above
# import math

# already imported above
# import rosidl_parser.definition
