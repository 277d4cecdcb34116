"""`Patched`: a library function (`builtins.print`, `warnings.warn`) replaced by a
recording one while at least one trace runs user code, and put back when the last one
ends; counted under a lock, so threads tracing at once share one replacement
(print_replay.py, warning_replay.py)."""
import threading


class Patched:
    def __init__(self, owner, name):
        self.owner, self.name = owner, name
        self.real = getattr(owner, name)    # what the replacement calls through
        self._lock = threading.Lock()
        self._users = 0

    def enter(self, replacement):
        with self._lock:
            if self._users == 0:
                self.real = getattr(self.owner, self.name)
                setattr(self.owner, self.name, replacement)
            self._users += 1

    def exit(self):
        with self._lock:
            self._users -= 1
            if self._users == 0:
                setattr(self.owner, self.name, self.real)
