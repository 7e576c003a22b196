"""A fault-injecting TCP proxy for cluster tests: it forwards every connection to a target,
and can refuse and cut the connections coming from given source addresses (a partition) or
delay what it forwards.

Each node of a test cluster listens on its own loopback address (127.0.1.N), connects to its
peers from it (`sluice server --source-ip`), and advertises a proxy address (127.0.0.N) that
forwards to it. A proxy thus sees which node a connection comes from, and cutting node 2
off is: its own proxy refuses the others' addresses, and the others' proxies refuse its.
Clients (from 127.0.0.1) go through untouched.
"""

from __future__ import annotations

import asyncio
import threading
from typing import List, Set, Tuple


class FaultProxy:
    def __init__(self, listen: List[Tuple[str, int]], target_host: str):
        """Forwards each (host, port) of `listen` to (`target_host`, port)."""
        self.listen = listen
        self.target_host = target_host
        self.blocked: Set[str] = set()
        self.delay_s = 0.0
        # Evidence that a fault happened: connections cut by `block`, new ones refused while
        # blocked, and chunks forwarded late.
        self.cut = 0
        self.refused = 0
        self.delayed = 0
        self.conns: List[Tuple[str, asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("the proxy did not start")

    # ------------------------------------------------------------ control (any thread)
    def block(self, sources: Set[str]) -> None:
        """Refuses new connections from `sources` and cuts the open ones."""
        asyncio.run_coroutine_threadsafe(self._block(set(sources)), self.loop).result(10)

    def heal(self) -> None:
        self.loop.call_soon_threadsafe(self.blocked.clear)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    # ------------------------------------------------------------ the loop
    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        for host, port in self.listen:
            self.loop.run_until_complete(asyncio.start_server(
                lambda r, w, p=port: self._serve(r, w, p), host, port))
        self.ready.set()
        self.loop.run_forever()

    async def _block(self, sources: Set[str]) -> None:
        self.blocked |= sources
        for src, a, b in list(self.conns):
            if src in sources:
                self.cut += 1
                for w in (a, b):
                    w.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     port: int) -> None:
        src = writer.get_extra_info("peername")[0]
        if src in self.blocked:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_r, up_w = await asyncio.open_connection(self.target_host, port)
        except OSError:
            writer.transport.abort()
            return
        entry = (src, writer, up_w)
        self.conns.append(entry)
        try:
            await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer))
        finally:
            self.conns.remove(entry)
            for w in (writer, up_w):
                w.transport.abort()

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                if self.delay_s:
                    self.delayed += 1
                    await asyncio.sleep(self.delay_s)
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            w.transport.abort()
