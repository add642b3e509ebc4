"""openpi's wire, read and written without trusting the bytes: msgpack maps whose numpy arrays
are maps of their own (openpi-client's ``__ndarray__`` form, or msgpack-numpy's ``nd`` form).

Reading costs about a copy of the frame's bytes, whatever its shape: only the values the planner
reads are built, each within a bound (`VALUE_BYTES`); the rest (camera images, say) is skipped
unbuilt (`decode`). Reading never runs code the frame chose: no pickle (an object array,
msgpack-numpy's pickled ``kind``, is refused, never loaded), no msgpack extension types, only
numeric dtypes (bool, int, uint, float) whose bytes match their shape. Every failure is a
`FrameError` (an InvalidRequestError; a `FrameCostError` for a frame past its bounds) with a
message a person can act on; nothing else escapes `decode`.

An observation dict names the planner's inputs by key (`OpenpiKeys`, defaults in
serving/config.py): the observation (required), the goal (required when an episode starts), the
model, an episode reset flag and the episode options (``seed``, ``mode`` and the per-episode
planner options).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
from google.protobuf.descriptor import FieldDescriptor

from l3p.core.names import is_bool, is_int, is_real
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos.mapping import MODE_ENUM, SEARCH_ENUM
from l3p.serving.config import OPENPI_KEYS
from l3p.serving.errors import InvalidRequestError

# Array dtypes a frame may carry: numbers only (an object array would be a pickle).
_KINDS = "biuf"
_MAX_NDIM = 8
# The first bytes of a pickle (protocol 2 and later): named in the refusal, never loaded.
_PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
_OPTION_FIELDS = {field.name: field for field in pb.EpisodeOptions.DESCRIPTOR.fields}
_ENUM_OPTIONS = {"mode": MODE_ENUM, "search": SEARCH_ENUM}
_EXPECTED = {FieldDescriptor.TYPE_BOOL: "true or false", FieldDescriptor.TYPE_DOUBLE: "a number"}


class FrameError(InvalidRequestError):
    """A frame that is not an observation this server can read."""


class FrameCostError(FrameError):
    """A frame that would cost more than its bounds to read (answered RESOURCE_EXHAUSTED)."""


# What reading a frame may cost. The values the planner reads are built, each within its bound in
# bytes, by role; a vector's bound holds 4,096 float64 numbers in either array form.
VALUE_BYTES = {"observation": 40_000, "goal": 40_000, "options": 4096, "model": 512, "reset": 64}
MAX_KEYS = 64
MAX_KEY_BYTES = 256
SKIPPED = object()  # the value of a key the planner does not read: skipped unread
PROMPT_KEY = "prompt"  # openpi's language instruction: read for its presence only, to name the goal key


# -- arrays


def _field(item: dict, name: str) -> Any:
    """A field of an array map: packed as bytes keys by openpi-client and msgpack-numpy, as str
    keys by some other clients."""
    value = item.get(name.encode())
    return item.get(name) if value is None else value


def _dtype(text: Any) -> np.dtype:
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str) or len(text) > 16:
        raise FrameError(f"an array's dtype is {_shown(text)}, expected a dtype string such as '<f4'")
    try:
        dtype = np.dtype(text)
    except (TypeError, ValueError):
        raise FrameError(f"an array's dtype {text!r} is not a numpy dtype") from None
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.shape:
        what = "an object array (a pickle)" if dtype.kind == "O" else f"dtype {text!r}"
        raise FrameError(f"{what} is refused: arrays of bool, int, uint or float only; this server "
                         "never unpickles anything")
    return dtype


def _array(data: Any, dtype: np.dtype, shape: Any) -> np.ndarray:
    if not isinstance(shape, (list, tuple)) or len(shape) > _MAX_NDIM or not all(
            type(n) is int and n >= 0 for n in shape):
        raise FrameError(f"an array's shape is {_shown(shape)}, expected a list of at most "
                         f"{_MAX_NDIM} sizes >= 0")
    if not isinstance(data, bytes):
        raise FrameError(f"an array's data is {type(data).__name__}, expected bytes")
    if math.prod(shape) * dtype.itemsize != len(data):
        raise FrameError(f"an array of shape {list(shape)} and dtype {dtype.str} takes "
                         f"{math.prod(shape) * dtype.itemsize} bytes, its data has {len(data)}")
    return np.frombuffer(data, dtype).reshape(shape)


def _scalar(data: Any, dtype: np.dtype) -> np.generic:
    if isinstance(data, bytes) and len(data) == dtype.itemsize:
        return np.frombuffer(data, dtype)[0]
    if not is_real(data) and not isinstance(data, bool):
        raise FrameError(f"a numpy scalar's value is {type(data).__name__}, expected a number")
    try:
        with np.errstate(all="raise"):  # a value float16 cannot hold: refused, not a warning on stderr
            return dtype.type(data)
    except (OverflowError, ValueError, FloatingPointError):
        raise FrameError(f"a numpy scalar's value does not fit dtype {dtype.str}") from None


def _object_hook(item: dict) -> Any:
    """Turns the array maps of both numpy conventions into arrays; other maps pass."""
    if b"__ndarray__" in item or "__ndarray__" in item:  # openpi-client
        return _array(_field(item, "data"), _dtype(_field(item, "dtype")), _field(item, "shape"))
    if b"__npgeneric__" in item or "__npgeneric__" in item:
        return _scalar(_field(item, "data"), _dtype(_field(item, "dtype")))
    if b"nd" in item or "nd" in item:  # msgpack-numpy
        kind = _field(item, "kind")
        if kind in (b"O", "O"):
            raise FrameError("msgpack-numpy kind b'O' is a pickled object: refused; this server never "
                             "unpickles anything")
        if kind not in (b"", "", None):
            raise FrameError(f"msgpack-numpy kind {_shown(kind)} is refused: plain numeric arrays only")
        dtype = _dtype(_field(item, "type"))
        if _field(item, "nd") is True:
            return _array(_field(item, "data"), dtype, _field(item, "shape"))
        return _scalar(_field(item, "data"), dtype)
    return item


def _refuse_ext(code: int, data: bytes) -> Any:
    raise FrameError(f"msgpack extension type {code} is refused: plain msgpack and numpy arrays only")


def _shown(value: Any) -> str:
    return ascii(value)[:60]


def _type_name(first: int) -> str:
    """The kind of msgpack value a first byte starts, as Python names it."""
    if first <= 0x7F or first >= 0xE0 or 0xCC <= first <= 0xD3:
        return "int"
    for low, high, name in ((0x80, 0x8F, "dict"), (0x90, 0x9F, "list"), (0xA0, 0xBF, "str"),
                            (0xC0, 0xC0, "nil"), (0xC2, 0xC3, "bool"), (0xC4, 0xC6, "bytes"),
                            (0xC7, 0xC9, "extension"), (0xCA, 0xCB, "float"), (0xD4, 0xD8, "extension"),
                            (0xD9, 0xDB, "str"), (0xDC, 0xDD, "list"), (0xDE, 0xDF, "dict")):
        if low <= first <= high:
            return name
    return "invalid"  # 0xC1: never used


def _not_msgpack(exc: Exception) -> FrameError:
    return FrameError(f"the frame is not one msgpack value ({type(exc).__name__}: {str(exc)[:100]})")


def decode(frame: bytes | str, keys: OpenpiKeys) -> dict[str, Any]:
    """The observation dict of one frame, its keys mapped to their values where `keys` names them
    and to SKIPPED elsewhere; FrameError for anything else, FrameCostError for a frame that would
    cost more than its bounds to read.

    Only the values the planner reads are built, each within its byte bound (VALUE_BYTES); every
    other value (camera images, say) is skipped by the C reader without building an object, so a
    frame of any shape within --openpi-max-frame-bytes costs about a copy of its bytes to read."""
    if isinstance(frame, str):
        raise FrameError("a text frame: send the observation dict as a binary msgpack frame")
    if frame.startswith(_PICKLE_MAGIC):
        raise FrameError("the frame looks like a pickle: refused unread; send msgpack (this server "
                         "never unpickles anything)")
    data = memoryview(frame)
    reader = msgpack.Unpacker(None, max_buffer_size=max(len(frame), 1))
    reader.feed(frame)
    kind = _type_name(frame[0]) if frame else "invalid"
    try:
        if kind != "dict":
            reader.skip()
        else:
            spans = [_spans(reader) for _ in range(_map_size(reader))]
    except FrameError:
        raise
    except Exception as exc:  # msgpack's own errors: bad or missing bytes, nesting too deep
        raise _not_msgpack(exc) from None
    if reader.tell() != len(frame):
        raise FrameError(f"the frame is not one msgpack value ({len(frame) - reader.tell()} bytes "
                         "after the first)")
    if kind != "dict":
        raise FrameError(f"the frame is a msgpack {kind}, expected a map (the observation dict)")
    bounds = {getattr(keys, role): limit for role, limit in VALUE_BYTES.items()}
    item: dict[str, Any] = {}
    for (key_start, key_end), (start, end) in spans:
        if key_end - key_start > MAX_KEY_BYTES:
            raise FrameCostError(f"a key of {key_end - key_start} bytes (at most {MAX_KEY_BYTES})")
        key = _read(data[key_start:key_end])
        if not isinstance(key, str):
            raise FrameError("the observation dict's keys must be strings")
        limit = bounds.get(key)
        if limit is None:
            item[key] = SKIPPED
        elif end - start > limit:
            raise FrameCostError(f"{key} takes {end - start} bytes, at most {limit} are read")
        else:
            item[key] = _read(data[start:end])
    return item


def _read(data: memoryview) -> Any:
    """One value, its arrays as numpy arrays; FrameError for anything else."""
    try:
        return msgpack.unpackb(data, raw=False, object_hook=_object_hook, ext_hook=_refuse_ext,
                               strict_map_key=True, timestamp=0)
    except FrameError:
        raise
    except Exception as exc:  # msgpack's own errors: bad bytes (a string that is not UTF-8, say)
        raise _not_msgpack(exc) from None


def _map_size(reader: msgpack.Unpacker) -> int:
    size = reader.read_map_header()
    if size > MAX_KEYS:
        raise FrameCostError(f"the observation dict has {size} keys (at most {MAX_KEYS})")
    return size


def _spans(reader: msgpack.Unpacker) -> tuple[tuple[int, int], tuple[int, int]]:
    """Where the next key and its value lie in the frame: skipped, not read."""
    key_start = reader.tell()
    reader.skip()
    start = reader.tell()
    reader.skip()
    return (key_start, start), (start, reader.tell())


def _pack_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {b"__ndarray__": True, b"data": value.tobytes(), b"dtype": value.dtype.str,
                b"shape": value.shape}
    if isinstance(value, np.generic):
        return {b"__npgeneric__": True, b"data": value.item(), b"dtype": value.dtype.str}
    raise TypeError(f"cannot pack {type(value).__name__}")


def packer() -> msgpack.Packer:
    """A packer of replies (and the metadata frame): arrays in openpi-client's form."""
    return msgpack.Packer(default=_pack_default)


# -- the observation dict


@dataclass(frozen=True)
class OpenpiKeys:
    """Where the planner's inputs are in an observation dict."""

    observation: str = OPENPI_KEYS["observation"]
    goal: str = OPENPI_KEYS["goal"]
    model: str = OPENPI_KEYS["model"]
    reset: str = OPENPI_KEYS["reset"]
    options: str = OPENPI_KEYS["options"]

    @classmethod
    def of(cls, pairs: tuple[tuple[str, str], ...]) -> OpenpiKeys:
        return cls(**dict(pairs))


@dataclass(frozen=True)
class Request:
    """What one observation dict asks: the observation, and the episode it belongs to."""

    observation: np.ndarray
    goal: np.ndarray | None  # None: the running episode's
    model: str | None  # None: the running episode's (the default model for a first episode)
    reset: bool
    options: pb.EpisodeOptions | None  # None: the running episode's (the defaults at first)
    prompt: bool = False  # the dict has a "prompt" (openpi's text instruction, which no goal replaces)


def vector(value: Any, key: str) -> np.ndarray:
    """A 1-D float32 vector from an array of shape [n] or [1, n], or a list of numbers; its length
    and finiteness are checked where its dimension is known (the servicer)."""
    if isinstance(value, (list, tuple)):
        if not all(is_real(v) for v in value):
            raise FrameError(f"{key} must be numbers; got a list holding "
                             f"{next(type(v).__name__ for v in value if not is_real(v))}")
        try:
            value = np.asarray(value, np.float64)
        except OverflowError:
            raise FrameError(f"{key} holds an integer too large for a float") from None
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise FrameError(f"{key} is {type(value).__name__}"
                         + (f" of dtype {value.dtype}" if isinstance(value, np.ndarray) else "")
                         + ", expected an array of numbers (shape [n] or [1, n])")
    if value.ndim == 2 and value.shape[0] == 1:
        value = value[0]
    if value.ndim != 1:
        raise FrameError(f"{key} has shape {list(value.shape)}, expected [n] or [1, n]")
    with np.errstate(over="ignore"):  # too large for float32: inf, refused as such by the servicer
        return value.astype(np.float32)


def episode_options(value: Any, key: str) -> pb.EpisodeOptions:
    """``{"seed": 7, "mode": "l3p", ...}`` as the proto's options; their ranges are checked where
    gRPC's are (serving/mapping.py: episode_config)."""
    if not isinstance(value, dict):
        raise FrameError(f"{key} is {type(value).__name__}, expected a map of episode options")
    options = pb.EpisodeOptions()
    for name, raw in value.items():
        field = _OPTION_FIELDS.get(name)
        if field is None:
            raise FrameError(f"{key} has {_shown(name)}, not an episode option; expected some of "
                             f"{', '.join(_OPTION_FIELDS)}")
        item = raw.item() if isinstance(raw, np.generic) else raw
        if name in _ENUM_OPTIONS:
            names = _ENUM_OPTIONS[name]
            if not isinstance(item, str) or item not in names:
                raise FrameError(f"{key}.{name} is {_shown(item)}, expected one of {', '.join(names)}")
            setattr(options, name, names[item])
            continue
        if field.type == FieldDescriptor.TYPE_BOOL:
            ok = is_bool(item)
        elif field.type == FieldDescriptor.TYPE_DOUBLE:
            ok = is_real(item)
        else:  # the seed: uint64
            ok = is_int(item) and 0 <= item < 2**64
        expected = _EXPECTED.get(field.type, "an integer in [0, 2^64)")
        if not ok:
            raise FrameError(f"{key}.{name} is {_shown(item)}, expected {expected}")
        try:
            setattr(options, name, item)
        except (TypeError, ValueError, OverflowError):
            raise FrameError(f"{key}.{name} is {_shown(item)}, expected {expected}") from None
    return options


def request(item: dict[str, Any], keys: OpenpiKeys) -> Request:
    """The planner's inputs of one observation dict (FrameError names a key that is missing or
    wrong)."""
    if keys.observation not in item:
        present = ", ".join(_shown(k) for k in list(item)[:12])
        raise FrameError(f"the observation dict has no {keys.observation!r} (the observation "
                         f"vector); its keys: {present or 'none'} (--openpi-key observation=KEY "
                         "maps another)")
    observation = vector(item[keys.observation], keys.observation)
    goal = item.get(keys.goal)
    model = item.get(keys.model)
    if model is not None and not isinstance(model, str):
        raise FrameError(f"{keys.model} is {type(model).__name__}, expected a model name (string)")
    reset = item.get(keys.reset, False)
    if not is_bool(reset):
        raise FrameError(f"{keys.reset} is {_shown(reset)}, expected true or false")
    options = item.get(keys.options)
    return Request(
        observation=observation,
        goal=None if goal is None else vector(goal, keys.goal),
        model=model,
        reset=bool(reset),
        options=None if options is None else episode_options(options, keys.options),
        prompt=PROMPT_KEY in item,
    )
