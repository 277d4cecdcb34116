"""`tracegrad.save` / `tracegrad.load`: checkpoints in a safe format, written atomically.

What is stored, and how, is in Note [Checkpoint format] (`_checkpoint_format.py`): a zip
of `.npy` arrays plus a JSON manifest. Loading never unpickles and never runs code from
the file; a file that is truncated, corrupt, or not a tracegrad checkpoint (a PyTorch
pickle, say) raises `CheckpointError` (a RuntimeError) naming the file.

Atomicity: `save(obj, "ckpt.pt")` writes a temporary file in the same directory, flushes
and fsyncs it, then `os.replace`s it over the target (and fsyncs the directory), so a
crash at any moment leaves either the old file or the new one, never a mix. A file object
(`io.BytesIO`, an open file) is written in place: atomicity is then the caller's business.

>>> ckpt = {"model": model.state_dict(), "opt": opt.state_dict()}    # doctest: +SKIP
>>> tracegrad.save(ckpt, "ckpt.pt")                                   # doctest: +SKIP
>>> ckpt = tracegrad.load("ckpt.pt")                                  # doctest: +SKIP
"""
import io
import json
import os
import struct
import uuid
import zipfile
import zlib

import numpy as np

from ._checkpoint_format import (FORMAT, MANIFEST, VERSION, CheckpointError, Decoder,
                                 Encoder, tensor_entry)
from ._device import check_device, device
from ._errors import TracegradTypeError
from ._tensor import Tensor

__all__ = ["save", "load", "CheckpointError"]


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save `obj` (tensors, numbers, strings, None, bools and lists/tuples/dicts of them,
    e.g. state_dicts) to the path or binary file object `f`. The pickle arguments exist
    for PyTorch compatibility and are ignored: nothing is pickled."""
    from ._effects import note
    note("io", "tracegrad.save()")           # Note [Files] in _effects.py
    enc = Encoder()
    manifest = {"format": FORMAT, "version": VERSION, "root": enc.encode(obj)}
    if _is_path(f):
        _atomic_write(os.fspath(f), lambda fh: _write_zip(fh, manifest, enc.arrays))
    elif hasattr(f, "write"):
        _write_zip(f, manifest, enc.arrays)
    else:
        raise TracegradTypeError(f"save: f must be a path or a binary file object, got "
                                 f"{type(f).__name__}")


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _write_zip(fh, manifest, arrays):
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, allow_nan=False, separators=(",", ":")))
        for i, arr in enumerate(arrays):
            with zf.open(tensor_entry(i), "w", force_zip64=arr.nbytes > 2 ** 30) as out:
                np.lib.format.write_array(out, arr, allow_pickle=False)


def _atomic_write(path, write):
    """Run `write(file)` on a temporary sibling of `path`, fsync it, then rename it over
    `path`; on any failure the temporary file is removed and `path` is untouched."""
    path = os.path.abspath(os.fsdecode(path))
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o666)                                  # the umask applies, as for open()
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(folder)


def _fsync_dir(folder):
    """Make the rename itself durable (POSIX); harmless where directories can't be opened."""
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Load an object saved by `tracegrad.save` from a path or binary file object.

    `map_location` may be None, "cpu", a `device`, a dict of location strings, or a
    callable `(tensor, "cpu") -> tensor`; every tensor lands on the CPU. The file is never
    unpickled whatever `weights_only` says, so loading an untrusted file is safe.
    """
    if pickle_module is not None:
        raise TracegradTypeError("load: tracegrad checkpoints are never unpickled; "
                                 "pickle_module is not supported")
    mapper = _mapper(map_location)
    if _is_path(f):
        where = repr(os.fsdecode(f))
        with open(f, "rb") as fh:
            return _read(fh, where, mapper)
    if not hasattr(f, "read"):
        raise TracegradTypeError(f"load: f must be a path or a binary file object, got "
                                 f"{type(f).__name__}")
    return _read(f, _describe(f), mapper)


def _describe(f):
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, (str, bytes)) else f"<{type(f).__name__}>"


def _mapper(map_location):
    if map_location is None or isinstance(map_location, (str, device)):
        check_device(map_location)
        return lambda t: t
    if isinstance(map_location, dict):
        for target in map_location.values():
            check_device(target)
        return lambda t: t
    if callable(map_location):
        def apply(t):
            r = map_location(t, "cpu")
            return r if isinstance(r, Tensor) else t
        return apply
    raise TracegradTypeError(f"load: unsupported map_location {map_location!r}")


def _read(fh, where, mapper):
    def bad(why):
        return CheckpointError(f"{where} is not a valid tracegrad checkpoint: {why}. It may "
                               "be truncated or corrupt (an interrupted write or copy), or "
                               "written by another program.")
    if not (hasattr(fh, "seekable") and fh.seekable()):
        fh = io.BytesIO(fh.read())
    try:
        with zipfile.ZipFile(fh) as zf:
            return _decode(zf, where, mapper, bad)
    except CheckpointError:
        raise
    except zipfile.BadZipFile as e:
        raise bad(f"not a readable zip archive ({e})") from None
    except (EOFError, OSError, NotImplementedError, ValueError, struct.error, zlib.error,
            UnicodeDecodeError, OverflowError, MemoryError) as e:
        # what zipfile raises on damaged headers (bogus versions, sizes, methods, names)
        raise bad(f"reading failed ({type(e).__name__}: {e})") from None


def _decode(zf, where, mapper, bad):
    names = set(zf.namelist())
    if MANIFEST not in names:
        if any(n.endswith("data.pkl") for n in names):
            raise bad("it is a PyTorch pickle checkpoint (torch.save); tracegrad never "
                      "unpickles. Convert it with torch: load it with weights_only=True and "
                      "save each tensor with numpy")
        raise bad(f"no {MANIFEST} inside")
    try:
        manifest = json.loads(zf.read(MANIFEST).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise bad(f"the manifest is not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise bad("the manifest does not describe a tracegrad checkpoint")
    if manifest.get("version") != VERSION:
        raise bad(f"format version {manifest.get('version')!r} is not supported "
                  f"(this tracegrad reads version {VERSION})")

    def read(i):
        entry = tensor_entry(i)
        if entry not in names:
            raise bad(f"the manifest refers to {entry}, which is missing")
        try:
            with zf.open(entry) as src:        # streamed: no second copy of the data
                arr = np.lib.format.read_array(src, allow_pickle=False)
                if src.read(1):                  # also makes zipfile check the CRC
                    raise bad(f"{entry} has data after its array")
                return arr
        except zipfile.BadZipFile as e:
            raise bad(f"{entry} is damaged ({e})") from None
        except ValueError as e:           # includes object arrays refused without pickle
            raise bad(f"{entry} is not a plain numeric .npy array ({e})") from None

    dec = Decoder(read, mapper, where)
    try:
        return dec.decode(manifest.get("root"))
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"malformed manifest ({type(e).__name__}: {e})") from None
