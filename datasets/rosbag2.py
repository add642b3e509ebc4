"""rosbag2 bags (MCAP or sqlite3), read with ``rosbags`` (pure Python, no ROS install).

A topic's messages are decoded in bulk when they share one byte layout (the usual case: fixed-size
arrays, the same joint names every time): the first message is decoded, a copy of it with a
distinct marker in every float and stamp is encoded to find where each value sits, every other
byte is checked equal across the messages, and the values are read with one numpy gather. Any
topic that does not fit (variable lengths, joint order changing) is decoded message by message; both
give the same arrays (tested).
"""
from __future__ import annotations

import dataclasses
import itertools
import struct
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.dataset import DatasetError
from l3p.datasets.align import Stream, align
from l3p.datasets.mapping import END_TYPES, Mapping, Part
from l3p.datasets.messages import BadMessage, ends_episode, header_stamp_ns, message_vector, part_fields


def _typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)  # for bags that carry no message definitions


def read_raw(path: Path, topics: list[str]) -> tuple[dict[str, tuple[str, list[int], list[bytes]]], Any]:
    """Per topic: its message type, log times (ns) and raw CDR bytes; and the bag's typestore."""
    from rosbags.highlevel import AnyReader

    out: dict[str, tuple[str, list[int], list[bytes]]] = {}
    last = "the bag's index"
    try:
        with AnyReader([path], default_typestore=_typestore()) as reader:
            conns = [c for c in reader.connections if c.topic in topics]
            have = sorted({c.topic for c in reader.connections})
            for topic in topics:
                types = {c.msgtype for c in conns if c.topic == topic}
                if not types:
                    raise DatasetError(f"bag {path}: no topic {topic} (topics: {', '.join(have) or 'none'})")
                if len(types) > 1:
                    raise DatasetError(f"bag {path}: topic {topic} has several types ({', '.join(sorted(types))})")
                out[topic] = (types.pop(), [], [])
            files = _plain_mcap_files(path)
            if files is None:
                for conn, stamp, data in reader.messages(connections=conns):
                    entry = out[conn.topic]
                    entry[1].append(stamp)
                    entry[2].append(data)
                    last = conn.topic
            else:
                for f in files:
                    last = f.name
                    for topic, (stamps, datas) in _scan_mcap(f, set(topics)).items():
                        out[topic][1].extend(stamps)
                        out[topic][2].extend(datas)
                for topic, (_, stamps, datas) in out.items():
                    if any(b < a for a, b in zip(stamps, stamps[1:])):  # rosbags' order: by log time
                        order = np.argsort(np.array(stamps, np.int64), kind="stable")
                        out[topic] = (out[topic][0], [stamps[i] for i in order], [datas[i] for i in order])
            return out, reader.typestore
    except DatasetError:
        raise
    except Exception as exc:  # a truncated or corrupt file: rosbags' own errors, zstd/lz4, struct
        where = (f"after message {len(out[last][1]) - 1} of topic {last}" if last in out
                 else f"in {last}" if last.endswith(".mcap") else "at its index")
        if not Path(path).exists():
            where = "(no such file or directory)"
        raise DatasetError(f"bag {path}: unreadable {where} (truncated or corrupt? "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


# ---------------------------------------------------------------------------- MCAP, read directly

_U16, _U32, _U64 = (struct.Struct(f).unpack_from for f in ("<H", "<I", "<Q"))
_MESSAGE = struct.Struct("<HIQQ").unpack_from  # channel id, sequence, log time, publish time


def _plain_mcap_files(path: Path) -> list[Path] | None:
    """The bag's MCAP files, if it is MCAP without whole-file compression; else None (rosbags reads it)."""
    import yaml

    try:
        info = yaml.safe_load((Path(path) / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None
    if info.get("storage_identifier") != "mcap" or info.get("compression_mode"):
        return None
    return [Path(path) / f for f in info.get("relative_file_paths", [])]


def _scan_mcap(path: Path, topics: set[str]) -> dict[str, tuple[list[int], list[bytes]]]:
    """Log times and raw CDR bytes of ``topics``' messages, in file order: MCAP's records walked
    with struct, chunks decompressed (and checked) by rosbags. The same bytes as rosbags' reader
    yields (tested), a few times faster: it keeps no per-message objects."""
    from rosbags.rosbag2.storage_mcap import decompress

    buf = path.read_bytes()
    if buf[:8] != b"\x89MCAP0\r\n":
        raise ValueError(f"{path.name} is not an MCAP file")
    channels: dict[int, tuple[list[int], list[bytes]]] = {}
    out: dict[str, tuple[list[int], list[bytes]]] = {}

    def walk(data: bytes, pos: int, end: int, top: bool) -> None:
        while pos < end:
            op = data[pos]
            (size,) = _U64(data, pos + 1)
            body, pos = pos + 9, pos + 9 + size
            if pos > end:
                raise ValueError(f"truncated record at byte {body - 9} of {path.name}")
            if op == 0x05:
                channel, _, log_time, _ = _MESSAGE(data, body)
                into = channels.get(channel)
                if into is not None:
                    into[0].append(log_time)
                    into[1].append(data[body + 22:pos])
            elif op == 0x04:
                (channel,) = _U16(data, body)
                (length,) = _U32(data, body + 4)
                topic = data[body + 8:body + 8 + length].decode()
                if topic in topics and channel not in channels:
                    channels[channel] = out.setdefault(topic, ([], []))
            elif op == 0x06 and top:
                (usize,) = _U64(data, body + 16)
                (crc,) = _U32(data, body + 24)
                (length,) = _U32(data, body + 28)
                compression = data[body + 32:body + 32 + length].decode()
                (rsize,) = _U64(data, body + 32 + length)
                start = body + 40 + length
                records = decompress(data[start:start + rsize], compression, usize, crc)
                walk(records, 0, len(records), False)
            elif op == 0x0F and top:  # data end: the summary follows
                return
        if top:
            raise ValueError(f"{path.name} ends without its data-end record (truncated)")

    walk(buf, 8, len(buf), True)
    return out


# ------------------------------------------------------------------------------- bulk decoding

_F64, _F32 = np.dtype("<f8"), np.dtype("<f4")


def _mark(msg: Any, counter: itertools.count, leaves: list[tuple[bytes, Any]]) -> None:
    """Put a distinct marker in every float and stamp of ``msg`` (in place); ``leaves`` gets each
    marker's bytes and value."""
    for f in dataclasses.fields(msg):
        value = getattr(msg, f.name)
        if isinstance(value, float):  # an exact float32 value, so a float32 field encodes it unchanged
            marker = float(np.float32(2.0 ** 90 * (1 + next(counter) / 2 ** 20)))
            setattr(msg, f.name, marker)
            leaves.append((np.float64(marker).tobytes(), marker))
            leaves.append((np.float32(marker).tobytes(), marker))
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.dtype.itemsize in (4, 8):
            dtype = _F64 if value.dtype.itemsize == 8 else _F32
            markers = np.array([2.0 ** 90 * (1 + next(counter) / 2 ** 20) for _ in range(len(value))], dtype)
            setattr(msg, f.name, markers)
            leaves.extend((m.tobytes(), float(m)) for m in markers)
        elif getattr(value, "__msgtype__", "") == "builtin_interfaces/msg/Time":
            k = next(counter)
            value.sec, value.nanosec = 0x2E3C0000 + k, 0x1A1B0000 + k
            leaves.append((np.int32(value.sec).tobytes(), ("sec", k)))
            leaves.append((np.uint32(value.nanosec).tobytes(), ("nanosec", k)))
        elif dataclasses.is_dataclass(value):
            _mark(value, counter, leaves)
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for item in value:
                _mark(item, counter, leaves)


def _bulk(store: Any, msgtype: str, datas: list[bytes], parts: list[Part], fields: list[tuple[str, ...]],
          want_header: bool) -> tuple[list[np.ndarray], np.ndarray | None] | None:
    """Every message's part values (and header stamps) in one gather, or None where the messages do
    not share one layout."""
    size = len(datas[0])
    if datas[0][:2] != b"\x00\x01" or any(len(d) != size for d in datas):  # little-endian CDR, one size
        return None
    marked = store.deserialize_cdr(datas[0], msgtype)
    leaves: list[tuple[bytes, Any]] = []
    try:
        _mark(marked, itertools.count(1), leaves)
        encoded = bytes(store.serialize_cdr(marked, msgtype))
    except Exception:  # a type the markers do not fit (bounded arrays, ...): decode one by one
        return None
    if len(encoded) != size:
        return None
    free = np.zeros(size, bool)
    where: dict[Any, tuple[int, np.dtype]] = {}
    for pattern, key in leaves:
        at = encoded.find(pattern)
        if at < 0:
            continue  # the other width of a scalar marker
        if encoded.find(pattern, at + 1) >= 0:
            return None
        free[at:at + len(pattern)] = True
        if key not in where or len(pattern) == 8:
            where[key] = (at, {8: _F64, 4: _F32}[len(pattern)] if not isinstance(key, tuple) else
                          np.dtype("<i4") if key[0] == "sec" else np.dtype("<u4"))
    block = np.frombuffer(b"".join(datas), np.uint8).reshape(len(datas), size)
    const = ~free
    if not (block[:, const] == block[0, const]).all():
        return None
    out = []
    for part, f in zip(parts, fields):
        try:
            keys = message_vector(marked, part, f).tolist()
        except BadMessage:
            return None
        if not all(k in where for k in keys) or len({where[k][1] for k in keys}) > 1:
            return None
        dtype = where[keys[0]][1]
        offsets = np.array([where[k][0] for k in keys])
        index = (offsets[:, None] + np.arange(dtype.itemsize)).ravel()
        out.append(np.ascontiguousarray(block[:, index]).view(dtype).reshape(len(datas), len(keys)).astype(np.float64))
    stamps = None
    if want_header:
        try:
            stamp = marked.header.stamp
        except AttributeError:
            return None
        k = stamp.sec - 0x2E3C0000
        (s_at, _), (n_at, _) = where[("sec", k)], where[("nanosec", k)]
        sec = np.ascontiguousarray(block[:, s_at:s_at + 4]).view("<i4").ravel().astype(np.int64)
        nsec = np.ascontiguousarray(block[:, n_at:n_at + 4]).view("<u4").ravel().astype(np.int64)
        stamps = sec * 1_000_000_000 + nsec
    return out, stamps


def decode_topic(store: Any, msgtype: str, datas: list[bytes], parts: list[Part], want_header: bool,
                 where: str, bulk: bool = True) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Each part's values [messages, dim] (float64) and, if wanted and the type has a header, the
    header stamps (ns); else None."""
    try:
        fields = [part_fields(p, msgtype) for p in parts]
    except BadMessage as err:
        raise DatasetError(f"{where}: {err}") from None
    first = store.deserialize_cdr(datas[0], msgtype)
    want_header = want_header and hasattr(first, "header")  # else the caller uses the receive times
    for p, f in zip(parts, fields):
        try:
            message_vector(first, p, f)
            if want_header:
                header_stamp_ns(first)
        except BadMessage as err:
            raise DatasetError(f"{where}: message 0 {err}") from None
    fast = _bulk(store, msgtype, datas, parts, fields, want_header) if bulk else None
    if fast is not None:
        return fast
    rows: list[list[np.ndarray]] = [[] for _ in parts]
    stamps = []
    for i, data in enumerate(datas):
        msg = store.deserialize_cdr(data, msgtype)
        try:
            for k, (p, f) in enumerate(zip(parts, fields)):
                vec = message_vector(msg, p, f)
                if rows[k] and len(vec) != len(rows[k][0]):
                    raise BadMessage(f"has {len(vec)} values, message 0 had {len(rows[k][0])}")
                rows[k].append(vec)
            if want_header:
                stamps.append(header_stamp_ns(msg))
        except BadMessage as err:
            raise DatasetError(f"{where}: message {i} {err}") from None
    return [np.array(r, np.float64) for r in rows], (np.array(stamps, np.int64) if want_header else None)


def episode_ends(store: Any, raw: tuple[str, list[int], list[bytes]], where: str) -> np.ndarray:
    """The log times of an end topic's messages that end an episode (`messages.ends_episode`);
    few messages, decoded one by one."""
    msgtype, log_times, datas = raw
    if msgtype not in END_TYPES:
        raise DatasetError(f"{where}: type {msgtype}, an episode end is one of {', '.join(END_TYPES)}")
    ends = [t for t, data in zip(log_times, datas) if ends_episode(store.deserialize_cdr(data, msgtype))]
    return np.array(ends, np.int64)


def read_rosbag(path: Path, m: Mapping, bulk: bool = True) -> tuple[dict[str, np.ndarray | None], dict[str, Any]]:
    """The bag's steps (arrays of `core.dataset`'s format) and a report of what was dropped."""
    roles = {"observation": m.observation, "action": m.action, "achieved_goal": m.achieved_goal,
             "desired_goal": m.desired_goal}
    topics = list(dict.fromkeys(p.topic for parts in roles.values() for p in parts))
    end_topic = m.episodes.end_topic()
    raw, store = read_raw(path, topics + ([end_topic[0]] if end_topic else []))
    header = m.alignment.stamps == "header"
    streams: dict[str, list[Stream]] = {role: [] for role in roles}
    for topic in topics:
        msgtype, log_times, datas = raw[topic]
        where = f"bag {path}: topic {topic}"
        if not datas:
            raise DatasetError(f"{where}: no messages")
        uses = [(role, p) for role, parts in roles.items() for p in parts if p.topic == topic]
        values, stamps = decode_topic(store, msgtype, datas, [p for _, p in uses], header, where, bulk)
        stamps = stamps if stamps is not None else np.array(log_times, np.int64)
        for (role, p), vals in zip(uses, values):
            bad = np.flatnonzero(~np.isfinite(vals).all(axis=1))
            if bad.size:
                raise DatasetError(f"{where}: message {int(bad[0])} has NaN or Inf ({role})")
            skew = None if role == "desired_goal" else int(m.alignment.max_skew_s * 1e9)
            streams[role].append(Stream(f"topic {topic}", stamps, vals, skew))
    if len(streams["action"]) != 1:
        raise DatasetError(f"{m.where()}: action must be one topic (the one that makes a step), got "
                           f"{len(streams['action'])}")
    ends = None if end_topic is None else episode_ends(store, raw[end_topic[0]], f"bag {path}: topic {end_topic[0]}")
    aligned = align(streams["action"][0], streams["observation"], streams["achieved_goal"], streams["desired_goal"],
                    int(m.alignment.max_gap_s * 1e9), f"bag {path}", ends)
    arrays = {"observations": aligned.observations, "actions": aligned.actions, "terminals": aligned.terminals,
              "achieved_goals": aligned.achieved_goals, "desired_goals": aligned.desired_goals}
    report = {"actions": int(len(streams["action"][0].stamps)), "steps": int(len(aligned.actions)),
              "dropped": aligned.dropped}
    return arrays, report
