"""Recording to rosbag2 bags (MCAP storage, written with ``rosbags``) as it happens: the topics'
messages as they were received (their CDR bytes and ROS types), in rotated bags, crash-safe.

A bag is written in ``NAME_0001.partial/`` and moved to ``NAME_0001/`` (a rename) only once it is
closed, with its MCAP summary and ``metadata.yaml``: a recorder killed at any moment, even with
``kill -9``, leaves every bag under its final name complete and readable, and the open one in its
``.partial`` folder (not read by ``l3p dataset import``: lost). ``rotate()`` closes the current bag
and opens the next (``NAME``, ``NAME_0001``, ...), which begins with the newest message of each
``held`` topic (the observations and goals a step pairs with), stamps unchanged, so that every bag
imports on its own. A name already there (or its ``.partial``) is never written over: a recorder
restarted with the same name continues the series. Memory holds one MCAP chunk (1 MiB).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from l3p.core.dataset import DatasetError


class BagSeries:
    def __init__(self, path: str | os.PathLike[str], topics: dict[str, str], held: set[str]) -> None:
        """``topics``: name -> message type (``pkg/msg/Type``), each a connection of every bag (also one
        that gets no message); ``held``: the topics whose newest message begins the next bag."""
        from rosbags.typesys import Stores, get_typestore

        self.path = Path(path)
        if self.path.suffix:
            raise DatasetError(f"a bag is a folder: name it without a suffix ({self.path.with_suffix('')}), "
                               f"not {self.path}")
        self.store = get_typestore(Stores.ROS2_KILTED)
        missing = [t for t in topics.values() if t not in self.store.fielddefs]
        if missing:
            raise DatasetError(f"bags: no message definition for {', '.join(sorted(set(missing)))} (rosbags knows "
                               f"the standard ROS 2 messages)")
        self.topics = topics
        self.held = held
        self.newest: dict[str, tuple[int, bytes]] = {}
        self.index = 0
        self.files: list[Path] = []  # every bag closed so far
        self.writer: Any = None
        self.connections: dict[str, Any] = {}
        self.messages = 0  # in the open bag
        self._open()

    def bag_path(self, index: int) -> Path:
        return self.path if index == 0 else self.path.with_name(f"{self.path.name}_{index:04d}")

    def _partial(self, index: int) -> Path:
        return self.bag_path(index).with_name(self.bag_path(index).name + ".partial")

    def _open(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer

        while self.bag_path(self.index).exists() or self._partial(self.index).exists():
            self.index += 1
        # the bag folder keeps its final name inside the .partial one: its MCAP file is named for it
        self.writer = Writer(self._partial(self.index) / self.bag_path(self.index).name, version=9,
                             storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.connections = {topic: self.writer.add_connection(topic, kind, typestore=self.store)
                            for topic, kind in self.topics.items()}
        self.messages = 0
        for topic, (stamp, data) in sorted(self.newest.items(), key=lambda item: item[1][0]):
            self.write(topic, stamp, data)

    def write(self, topic: str, stamp_ns: int, data: bytes) -> None:
        """One message (CDR bytes, as received) at ``stamp_ns``."""
        self.writer.write(self.connections[topic], stamp_ns, data)
        self.messages += 1
        if topic in self.held:
            self.newest[topic] = (stamp_ns, data)

    def _close(self, keep: bool) -> None:
        self.writer.close()
        partial = self._partial(self.index)
        if keep:
            os.replace(partial / self.bag_path(self.index).name, self.bag_path(self.index))
            self.files.append(self.bag_path(self.index))
        shutil.rmtree(partial)
        self.index += 1

    def rotate(self) -> None:
        self._close(keep=True)
        self._open()

    def close(self, keep: bool = True) -> None:
        """Closes the open bag; with ``keep`` False (it holds no step) it is removed."""
        if self.writer is not None:
            self._close(keep)
            self.writer = None
