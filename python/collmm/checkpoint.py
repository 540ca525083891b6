"""Checkpoints that a crash cannot tear: torch.distributed.checkpoint (DCP) into a new directory per
step, then an atomic switch of a "latest" pointer.

DCP writes each rank's shards in place. Saved over an older checkpoint and killed part-way, it
leaves the old one torn, and a later load may mix old and new weights without an error. Here:

    root/step-00000100/      one DCP checkpoint per step, never written over
    root/step-00000100/COMPLETE   written by rank 0 once every rank's shards and DCP's metadata are there
    root/latest              the name of the newest complete step, replaced atomically (rename)

save_checkpoint(state, root, step) saves; load_checkpoint(state, root) loads the newest complete
step into `state` (as dcp.load does) and returns its number, or None where there is none. A save
killed on any rank leaves the previous complete step as the one that loads.
"""
import os
import re
import shutil
from typing import Any, Dict, Optional

import torch.distributed as dist
import torch.distributed.checkpoint as dcp

_STEP = re.compile(r"^step-(\d{8,})$")
_COMPLETE = "COMPLETE"
_LATEST = "latest"


def _step_dir(root: str, step: int) -> str:
    return os.path.join(root, f"step-{step:08d}")


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(os.path.dirname(path) or ".")


def _rank(group) -> int:
    return dist.get_rank(group) if dist.is_initialized() else 0


def _barrier(group) -> None:
    if dist.is_initialized():
        dist.barrier(group=group)


def _agree(value, group):
    """Rank 0's value on every rank of the group."""
    if not dist.is_initialized():
        return value
    box = [value]
    dist.broadcast_object_list(box, group=group, group_src=0)
    return box[0]


def complete_steps(root: str) -> list:
    """The steps under `root` whose save finished on every rank, oldest first."""
    if not os.path.isdir(root):
        return []
    steps = []
    for name in os.listdir(root):
        m = _STEP.match(name)
        if m and os.path.isfile(os.path.join(root, name, _COMPLETE)):
            steps.append(int(m.group(1)))
    return sorted(steps)


def save_checkpoint(state_dict: Dict[str, Any], root: str, step: int, group: Optional[dist.ProcessGroup] = None,
                    keep: Optional[int] = None) -> str:
    """Saves `state_dict` (as dcp.save) into root/step-<step>, then marks it complete and points
    root/latest at it. A complete step is never written over (FileExistsError); what a killed save
    left under that name is removed first. Collective over `group` (default: the world). keep=N
    removes all but the newest N complete steps afterwards. Returns the directory."""
    if step < 0:
        raise ValueError(f"collmm.torch.save_checkpoint: step must be >= 0 (got {step})")
    path = _step_dir(root, step)
    found = None
    if _rank(group) == 0:
        found = "complete" if os.path.isfile(os.path.join(path, _COMPLETE)) else None
        if found is None and os.path.exists(path):  # a save killed part-way: never loaded, made anew
            shutil.rmtree(path)
    if _agree(found, group) == "complete":
        raise FileExistsError(f"collmm.torch.save_checkpoint: {path!r} holds a complete checkpoint, which is never "
                              "written over (give a new step)")
    dcp.save(state_dict, checkpoint_id=path, process_group=group)
    _barrier(group)  # every rank's shards are written (dcp.save's metadata by its coordinator too)
    if _rank(group) == 0:
        _write_atomically(os.path.join(path, _COMPLETE), f"{step}\n")
        _write_atomically(os.path.join(root, _LATEST), os.path.basename(path) + "\n")
        if keep is not None and keep > 0:
            for old in complete_steps(root)[:-keep]:
                shutil.rmtree(_step_dir(root, old), ignore_errors=True)
    _barrier(group)
    return path


def load_checkpoint(state_dict: Dict[str, Any], root: str, group: Optional[dist.ProcessGroup] = None) -> Optional[int]:
    """Loads the newest complete step under `root` into `state_dict` (as dcp.load: in place) and
    returns its number; None (and `state_dict` untouched) where `root` holds no complete step. A step
    whose save did not finish on every rank is never loaded. Collective over `group`."""
    steps = complete_steps(root) if _rank(group) == 0 else None
    steps = _agree(steps, group)
    if not steps:
        return None
    step = steps[-1]
    dcp.load(state_dict, checkpoint_id=_step_dir(root, step), process_group=group)
    return step
