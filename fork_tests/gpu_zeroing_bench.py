"""The fork's KV block zeroing kernel on one PP stage, against a memset (GPU).

The device machine cannot install vLLM, so this needs only torch and triton:
it reads `_zero_kv_blocks_kernel` and `KVBlockZeroer` out of the fork's
`vllm/v1/worker/utils.py` at run time and drives them as the worker does.

    # here: copy the fork's file (and its tree id) into a git-ignored folder
    python3 fork_tests/gpu_zeroing_bench.py carry build/vllm build/gpu-zeroing
    # where a GPU is (SOURCE: that folder, or a fork tree):
    python fork_tests/gpu_zeroing_bench.py run build/gpu-zeroing --results DIR

`run` writes DIR/gpu-zeroing.json; without torch, triton or a CUDA device
it prints why it skipped, writes nothing and exits 0.

Layout: one Qwen3-0.6B PP=2 stage, 14 layers, FP8 KV (one byte per
element), block 16, 8 KV heads, head size 128, per-layer tensors
[num_blocks, 2, 16, 8, 128], block ids drawn at random out of 16384.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UTILS = Path("vllm/v1/worker/utils.py")
SOURCE_JSON = "source.json"
NAMES = ("_zero_kv_blocks_kernel", "KVBlockZeroer")

LAYERS, NUM_BLOCKS, BLOCK, HEADS, HEAD_SIZE = 14, 16384, 16, 8, 128
NEW_BLOCKS = (1, 8, 128, 512)
GRAPH_LAUNCHES = 20
HOST_CALLS = 2000

# What the extracted code needs from vllm, given without vllm: the zeroer
# only tests `isinstance(spec, AttentionSpec)`; async_tensor_h2d is vllm's
# list branch (pinned host tensor, non-blocking copy).
_PRELUDE = """\
from collections.abc import Iterable
from itertools import product as iprod
from typing import Any

import torch
import triton
import triton.language as tl


class AttentionSpec:
    def __init__(self, block_size):
        self.block_size = block_size


def async_tensor_h2d(data, device=None, dtype=None, out=None):
    pin = torch.cuda.is_available()
    t = torch.tensor(data, dtype=dtype, pin_memory=pin, device="cpu")
    return t.to(device=device, dtype=dtype, non_blocking=True)

"""


class SourceError(Exception):
    pass


# --- the fork's source (standard library only) ------------------------------


def extract(text: str, names: tuple[str, ...] = NAMES) -> str:
    """The top-level definitions `names`, decorators included, in file order."""
    lines = text.splitlines(keepends=True)
    found: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found[node.name] = "".join(lines[first - 1 : node.end_lineno])
    missing = [n for n in names if n not in found]
    if missing:
        raise SourceError(f"no top-level {', '.join(missing)} in the source")
    return "\n\n".join(found[n] for n in names) + "\n"


def read_source(source: Path) -> tuple[str, dict[str, str]]:
    """utils.py's text and where it came from, from a fork tree or a carry folder."""
    if (source / UTILS).is_file():
        tree = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD^{tree}"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return (source / UTILS).read_text(), {"tree": tree, "from": str(source)}
    if (source / UTILS.name).is_file() and (source / SOURCE_JSON).is_file():
        meta = json.loads((source / SOURCE_JSON).read_text())
        return (source / UTILS.name).read_text(), meta
    raise SourceError(
        f"{source} holds neither {UTILS} (a fork tree) nor {UTILS.name} and "
        f"{SOURCE_JSON} (made by `carry`)"
    )


def carry(fork: Path, dest: Path) -> None:
    """Copy the fork's utils.py and its tree id into `dest` (git-ignored)."""
    if not (fork / UTILS).is_file():
        raise SourceError(f"{fork} is not a fork tree: no {UTILS}")
    text, meta = read_source(fork)
    extract(text)  # fail here, not on the device
    sys.path.insert(0, str(REPO))
    from forktool.pins import Pins

    meta["base_version"] = Pins.load().version
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fork / UTILS, dest / UTILS.name)
    (dest / SOURCE_JSON).write_text(json.dumps(meta, indent=1) + "\n")
    print(f"copied {fork / UTILS} (fork tree {meta['tree']}) to {dest}")


def skip_reason() -> str | None:
    """Why this machine cannot run the check, or None if it can."""
    try:
        import torch
    except ImportError:
        return "torch not installed"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    return None


# --- on the GPU ---------------------------------------------------------------


def load_kernel(code: str, workdir: Path) -> ModuleType:
    """Import the extracted code from a file: triton reads kernels' source."""
    path = workdir / "fork_kv_zeroing.py"
    path.write_text(_PRELUDE + code)
    spec = importlib.util.spec_from_file_location("fork_kv_zeroing", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_stage(
    module: ModuleType, torch: Any, device: Any, layers: int, num_blocks: int
) -> tuple[list[Any], Any]:
    """The stage's per-layer caches, random bytes, and a zeroer over them."""
    shape = (num_blocks, 2, BLOCK, HEADS, HEAD_SIZE)
    caches = [
        torch.randint(1, 256, shape, dtype=torch.uint8, device=device)
        for _ in range(layers)
    ]
    names = [f"layers.{i}.attn" for i in range(layers)]
    group = SimpleNamespace(
        kv_cache_spec=module.AttentionSpec(BLOCK),
        kv_cache_group_id=0,
        layer_names=names,
        kernel_block_stride=None,
    )
    context = {
        n: SimpleNamespace(kv_cache=c) for n, c in zip(names, caches, strict=True)
    }
    zeroer = module.KVBlockZeroer(device, [group], [BLOCK], context, num_blocks)
    return caches, zeroer


def check_zeroing(torch: Any, caches: list[Any], zeroer: Any, ids: list[int]) -> bool:
    """Zeroed blocks are zero; their neighbours keep their bytes."""
    chosen, num_blocks = set(ids), caches[0].shape[0]
    neighbours = sorted(
        {j for i in ids for j in (i - 1, i + 1) if 0 <= j < num_blocks} - chosen
    )
    for c in caches:  # earlier sizes may have zeroed some of these blocks
        c[ids] = 0xA5
    before = [c[neighbours].clone() for c in caches]
    zeroer.zero_block_ids(ids)
    if caches[0].is_cuda:
        torch.cuda.synchronize()
    zeroed = all(bool((c[ids] == 0).all()) for c in caches)
    kept = all(
        torch.equal(c[neighbours], b) for c, b in zip(caches, before, strict=True)
    )
    return zeroed and kept


def gpu_us(torch: Any, fn: Any, repeats: int) -> float:
    """Median GPU time of `fn` in microseconds (CUDA events around each call)."""
    times = []
    for _ in range(repeats):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def graph_us(torch: Any, fn: Any, repeats: int = 30) -> float:
    """Median time per call of `fn` replayed from a CUDA graph of 20 calls."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_LAUNCHES):
            fn()
    return gpu_us(torch, graph.replay, repeats) / GRAPH_LAUNCHES


def host_us(torch: Any, fn: Any) -> float:
    """Host time per call of `fn`, averaged over many calls."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(HOST_CALLS):
        fn()
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    return seconds / HOST_CALLS * 1e6


def measure(module: ModuleType) -> dict[str, Any]:
    import torch
    import triton

    torch.manual_seed(0)
    caches, zeroer = make_stage(module, torch, torch.device("cuda"), LAYERS, NUM_BLOCKS)
    if zeroer._meta is None:
        raise SourceError("the fork's KVBlockZeroer found nothing to zero")
    seg_addrs, strides, pages, chunks, blk_size, n_segs = zeroer._meta
    block_bytes = LAYERS * caches[0][0].numel() * caches[0].element_size()

    def launch(idx: Any) -> None:  # as KVBlockZeroer.zero_block_ids launches
        grid = (idx.numel(), n_segs, chunks)
        module._zero_kv_blocks_kernel[grid](
            seg_addrs, strides, pages, idx, BLOCK_SIZE=blk_size
        )

    rows = []
    for n in NEW_BLOCKS:
        ids = torch.randperm(NUM_BLOCKS)[:n].tolist()
        correct = check_zeroing(torch, caches, zeroer, ids)
        idx = torch.tensor(ids, dtype=torch.int64, device="cuda")
        buffer = torch.empty(n * block_bytes, dtype=torch.uint8, device="cuda")
        rows.append(
            {
                "new_blocks": n,
                "bytes": n * block_bytes,
                "correct": correct,
                "kernel_graph_us": graph_us(torch, lambda idx=idx: launch(idx)),
                "memset_graph_us": graph_us(torch, buffer.zero_),
                "memset_with_launch_us": gpu_us(torch, buffer.zero_, 200),
            }
        )
        del buffer
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "layout": {
            "layers": LAYERS,
            "num_blocks": NUM_BLOCKS,
            "per_layer_shape": [NUM_BLOCKS, 2, BLOCK, HEADS, HEAD_SIZE],
            "dtype": "fp8 (stored as uint8)",
            "bytes_per_block": block_bytes,
            "segments": n_segs,
            "kernel_block_size": blk_size,
            "chunks": chunks,
        },
        "rows": rows,
        "host": host_costs(torch, module, zeroer, launch),
    }


def host_costs(
    torch: Any, module: ModuleType, zeroer: Any, launch: Callable[[Any], None]
) -> dict[str, Any]:
    """The CPU time of zeroing 8 new blocks, part by part: the block ids'
    copy to the device, the kernel's launch, and the zeroer's whole call."""
    ids8 = torch.randperm(NUM_BLOCKS)[:8].tolist()
    idx8 = torch.tensor(ids8, dtype=torch.int64, device="cuda")
    h2d = module.async_tensor_h2d
    return {
        "new_blocks": 8,
        "h2d_copy_us": host_us(
            torch, lambda: h2d(ids8, device="cuda", dtype=torch.int64)
        ),
        "triton_launch_us": host_us(torch, lambda: launch(idx8)),
        "zero_block_ids_us": host_us(torch, lambda: zeroer.zero_block_ids(ids8)),
    }


def table(data: dict[str, Any]) -> str:
    lines = [
        f"{data['device']}, torch {data['torch']}, triton {data['triton']}",
        "| new blocks | MiB zeroed | kernel (graph of 20) | memset (graph of 20)"
        " | memset incl. launch | correct |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['new_blocks']} | {r['bytes'] / 2**20:.2f} "
            f"| {r['kernel_graph_us']:.2f} µs | {r['memset_graph_us']:.2f} µs "
            f"| {r['memset_with_launch_us']:.2f} µs | {r['correct']} |"
        )
    h = data["host"]
    lines.append(
        f"host per call, {h['new_blocks']} ids: h2d copy {h['h2d_copy_us']:.1f} µs, "
        f"Triton launch {h['triton_launch_us']:.1f} µs, "
        f"zero_block_ids {h['zero_block_ids_us']:.1f} µs"
    )
    return "\n".join(lines)


def run(source: Path, results: Path) -> int:
    text, meta = read_source(source)
    code = extract(text)
    reason = skip_reason()
    if reason:
        print(f"SKIP gpu-zeroing: {reason}; nothing measured, nothing written")
        return 0
    sys.path.insert(0, str(REPO))  # before measuring: fail early if it cannot
    from forktool.checks import CheckResult, write
    from forktool.pins import Pins

    meta.setdefault("base_version", Pins.load().version)

    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        data = measure(load_kernel(code, Path(tmp)))
    data["source"] = meta
    printed = table(data)
    print(printed)
    rows = data["rows"]
    ok = all(r["correct"] for r in rows)
    result = CheckResult(
        check="gpu-zeroing",
        ok=ok,
        tree=meta.get("tree", ""),
        base_version=meta["base_version"],
        command=f"python fork_tests/gpu_zeroing_bench.py run {source}",
        seconds=round(time.monotonic() - start, 1),
        counts={"sizes": len(rows), "correct": sum(r["correct"] for r in rows)},
        excerpts={"table": printed},
        data=data,
    )
    print(f"wrote {write(results, result)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("carry", help="copy the fork's kernel source for a device")
    c.add_argument("fork", type=Path)
    c.add_argument("dest", type=Path)
    r = sub.add_parser("run", help="measure, or say why this machine cannot")
    r.add_argument("source", type=Path, help="a fork tree or a `carry` folder")
    r.add_argument("--results", type=Path, default=REPO / "build" / "results")
    args = parser.parse_args(argv)
    try:
        if args.command == "carry":
            carry(args.fork, args.dest)
            return 0
        return run(args.source, args.results)
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
