"""The benchmarks' process group under torchrun: the device, the ranks sharing one GPU, the group.

    add_args(parser)        --device cpu|cuda, --share-gpu, --nccl-only
    device = init(args)     NCCL env and torch.cuda.set_device as asked, then init_process_group

--share-gpu puts every rank on GPU 0, each an NCCL node of its own over loopback sockets
(NCCL_HOSTID per rank, docs/device-notes.md): correctness and host costs, not link timings.
--nccl-only makes the group init_process_group("nccl") (torchrun's usual group: collmm agrees over
its Store); else "cpu:gloo,cuda:nccl". CPU runs use gloo.
"""
import os

import torch
import torch.distributed as dist


def add_args(parser, device="cpu"):
    parser.add_argument("--device", default=device, choices=["cpu", "cuda"])
    parser.add_argument("--share-gpu", action="store_true",
                        help="every rank on GPU 0 (NCCL_HOSTID per rank): correctness, not timings")
    parser.add_argument("--nccl-only", action="store_true",
                        help='an NCCL-only group, init_process_group("nccl") (else "cpu:gloo,cuda:nccl")')


def init(args):
    """Joins the torchrun job's group as `args` asks; returns the rank's device."""
    if args.device != "cuda":
        dist.init_process_group("gloo")
        return torch.device("cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.share_gpu:
        os.environ.update(NCCL_HOSTID=f"h{local_rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    device = torch.device("cuda", 0 if args.share_gpu else local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl" if args.nccl_only else "cpu:gloo,cuda:nccl")
    return device
