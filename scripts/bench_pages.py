"""The documentation's benchmark pages, made from the benchmarks' JSON output.

    .venv/bin/python scripts/bench_pages.py            # writes docs/benchmarks/*.md and docs/benchmarks/img/*.svg
    .venv/bin/python scripts/bench_pages.py --check    # exit 1 when a page is out of date (no plots drawn)

Every ``docs/benchmarks/data/*.json`` is one run of one benchmark, as a benchmark's ``--json OUT``
writes it (``benchmarks/results.py``): its date, machine, command, source and tables of rows. Each
benchmark gets a page, ``docs/benchmarks/<benchmark>.md``, with its runs newest first: a markdown
table per table of rows, a bar chart of the figures ``PAGES`` names, and at the top the figures
that several runs share drawn over time. ``docs/benchmarks/index.md`` lists the pages. Plots are
SVG from matplotlib (the ``docs`` extra), written reproducibly: the same data gives the same bytes.

To add a run: ``python benchmarks/bench_zoo.py --json docs/benchmarks/data/bench_zoo-<date>-<machine>.json``,
then this script. A benchmark not in ``PAGES`` gets a page with its tables and no plots; list a
new page in ``mkdocs.yml``'s nav (``--check`` says which are missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"


@dataclass(frozen=True)
class Bars:
    """A bar chart of one table: a group per row (``labels`` joined), a bar per ``values`` column."""

    table: str
    labels: tuple[str, ...]
    values: tuple[str, ...]
    ylabel: str
    where: dict[str, Any] = field(default_factory=dict)
    """Only the rows whose columns have these values (a missing column reads as False)."""
    speedup: bool = False
    """Draw each row's speedup instead, horizontally: ``values`` are (before, after) and the row's
    ``unit`` says whether less is better (times) or more (rates)."""


RATES = ("TFLOP/s", "GFLOP/s", "GB/s", "rows/s", "tokens/s")
"""Units where more is better: a change's speedup is after / before."""


@dataclass(frozen=True)
class History:
    """One figure across runs: ``value`` of the rows of ``table`` matching ``where``, by date."""

    title: str
    table: str
    value: str
    where: dict[str, Any]
    ylabel: str
    series: str = ""
    """A column whose values are plotted as separate lines."""
    summary: bool = False
    """``value`` is a key of the run's summary, not a column of ``table``."""


@dataclass(frozen=True)
class Page:
    title: str
    about: str
    bars: tuple[Bars, ...] = ()
    history: tuple[History, ...] = ()


ON_DEVICE = ("halfway_ms", "halfway_on_device_ms", "torch_eager_ms", "torch_graph_ms", "torch_graph_host_ms")

PAGES: dict[str, Page] = {
    "demo": Page(
        "The demo", "`scripts/dev.sh demo` (`halfway demo`): the shipped ResNet-18 at quarter width and BERT-style "
        "encoder, float32 and float16, on numpy and on the OpenCL device, against the imported model in float32.",
        (Bars("demo", ("model", "place", "precision"), ("latency_ms",), "ms per run"),)),
    "bench_modern": Page(
        "Today's models on the CPU",
        "`benchmarks/bench_modern.py`: BERT-base, GPT-2 small, the T5-small encoder, ViT-B/16, ConvNeXt-T, "
        "MobileNetV3-Large and a YOLO-style detector at 640 px (made by `scripts/make_bench_models.py`), "
        "halfway's prepared numpy run after the default passes against ONNX Runtime on the CPU, float32, batch 1, "
        "paired rounds. A ratio is halfway's time over ONNX Runtime's: below 1 halfway is faster.",
        (Bars("ratio", ("model",), ("ratio_2_threads", "ratio_1_thread"), "halfway time / ONNX Runtime time"),
         Bars("latency", ("model",), ("halfway_ms", "onnxruntime_ms"), "ms per run")),
        (History("geomean over the seven models", "ratio", "geomean_2_threads", {}, "halfway / ONNX Runtime",
                 summary=True),)),
    "bench_zoo": Page(
        "ONNX's light zoo on the CPU",
        "`benchmarks/bench_zoo.py`: the nine light-zoo models shipped with onnx, halfway's numpy run against "
        "ONNX Runtime, float32, batch 1, paired rounds; `--under-load N` beside N busy processes. A ratio is "
        "halfway's time over ONNX Runtime's (the median of the rounds', and that of each one's fastest run).",
        (Bars("latency", ("model",), ("halfway_ms", "onnxruntime_ms"), "ms per run"),)),
    "bench_opencl_zoo": Page(
        "CNNs on OpenCL",
        "`benchmarks/bench_opencl_zoo.py`: ResNet-50 and VGG-19 built with `halfway.layers` on torchvision's "
        "weights, on halfway's OpenCL backend beside PyTorch on the same GPU in the same run (`--torch`); "
        "heuristic tensor-core tiles against tuned ones (`--tuning`); ONNX's light zoo against ONNX Runtime "
        "(`--onnx`). halfway runs from host arrays to host arrays and, where given, with its input on the device "
        "and its output left there; PyTorch eager on GPU tensors, its CUDA graph on GPU tensors and from host "
        "arrays to host arrays.",
        (Bars("torch", ("model", "batch", "dtype"), ON_DEVICE, "ms per run", {"dtype": "float16"}),
         Bars("tuning", ("model", "batch"), ("heuristic_ms", "tuned_ms", "torch_graph_ms"), "ms per run"),
         Bars("layout", ("program",), ("ms",), "ms per run"),
         Bars("onnx", ("model", "dtype"), ("halfway_ms", "onnxruntime_ms"), "ms per run")),
        (History("ResNet-50 float16, host to host", "torch", "halfway_ms",
                 {"model": "ResNet-50", "dtype": "float16", "channels_last": False}, "ms per run", series="batch"),
         History("VGG-19 float16, host to host", "torch", "halfway_ms",
                 {"model": "VGG-19", "dtype": "float16", "channels_last": False}, "ms per run", series="batch"))),
    "bench_opencl_bert": Page(
        "BERT-base on OpenCL",
        "`benchmarks/bench_opencl_bert.py`: transformers' BertModel at BERT-base's size (random weights, sdpa "
        "attention) exported by PyTorch, imported with symbolic batch and sequence, run on OpenCL at sequence 128 "
        "beside PyTorch on the same GPU; device memory is what preparing took from the GPU.",
        (Bars("bert", ("batch", "dtype"), ("halfway_ms", "torch_eager_ms", "torch_graph_ms"), "ms per run"),),
        (History("BERT-base float16, host to host", "bert", "halfway_ms", {"dtype": "float16"}, "ms per run",
                 series="batch"),)),
    "bench_opencl_kernels": Page(
        "OpenCL kernels",
        "`benchmarks/bench_opencl_kernels.py`: elementwise bandwidth against the driver's buffer copy, the GEMM "
        "at 4096^3 in TFLOP/s next to torch.matmul, and BERT-base's attention next to PyTorch's "
        "scaled_dot_product_attention.",
        (Bars("gemm", ("dtype", "system"), ("tflops",), "TFLOP/s"),
         Bars("attention", ("kernel",), ("device_us", "loop_us"), "µs per call"),
         Bars("bandwidth", ("dtype", "kernel"), ("gb_per_s",), "GB/s")),
        (History("float16 GEMM 4096^3", "gemm", "tflops", {"dtype": "float16"}, "TFLOP/s", series="system"),)),
    "bench_opencl_convs": Page(
        "ResNet-50's convolutions on OpenCL",
        "`benchmarks/bench_opencl_convs.py`: each distinct convolution shape of ResNet-50, launch by launch "
        "(profiling events), beside PyTorch + cuDNN.",
        (Bars("convolutions", ("shape",), ("halfway_us", "torch_us"), "µs per call"),)),
    "bench_batch": Page(
        "Batch inference and Ray",
        "`benchmarks/bench_batch.py`: rows/s of the demo model (ResNet-18 at quarter width, 128x128, batch dim "
        "fixed at 1) from the model's load to the last row, in this process and on a local Ray runtime "
        "(actor start included).",
        (Bars("throughput", ("runtime", "actors", "rows", "place"), ("rows_per_s",), "rows/s"),)),
    "bench_op_counts": Page(
        "Ops after the passes",
        "`benchmarks/bench_op_counts.py`: the ops halfway's default pipeline leaves of each modern fixture "
        "(`tests/fixtures/modern/`) beside the nodes ONNX Runtime's transformers optimizer leaves, and those of "
        "one transformer layer (`halfway_per_layer`: between the last two attentions)."),
    "bench_fusion": Page(
        "Transformer fusion",
        "`benchmarks/bench_fusion.py`: op counts before and after the default pipeline and fused against "
        "unfused latency on numpy."),
    "bench_float16": Page(
        "float16 conversion",
        "`benchmarks/bench_float16.py`: halfway's `float16_transpile` against onnxconverter-common and "
        "onnxruntime.transformers' conversions: time, casts, float32 ops left and the error."),
    "bench_passes": Page(
        "Pass pipeline cost", "`benchmarks/bench_passes.py`: the default pipeline's CPU time against program size, "
        "beside ONNX Runtime's graph optimisation."),
    "bench_dispatch": Page(
        "Dispatch overhead", "`benchmarks/bench_dispatch.py`: microseconds per op of chains of tiny elementwise "
        "ops (16 floats), beside ONNX Runtime (as many threads) and onnx.reference: scale and relu in turn, and "
        "(from 7770bba) an add of the input and a relu in turn, which halfway's numpy backend runs as one compiled "
        "call each, and an add of a broadcast vector and a relu in turn, a call an op (before 7770bba the add of the "
        "input was too).",
        (Bars("dispatch", ("chain", "runtime"), ("us_per_op",), "µs per op"),)),
    "bench_conv": Page(
        "numpy convolutions against a GEMM", "`benchmarks/bench_conv.py`: halfway's numpy conv2d on ResNet-50's "
        "convolution shapes against a bare BLAS GEMM of the same FLOPs.",
        (Bars("convolutions", ("shape",), ("halfway_gflops", "gemm_gflops"), "GFLOP/s"),)),
    "bench_jit": Page(
        "Compiled loops", "`benchmarks/bench_jit.py`: the light zoo with and without the compiled loops "
        "(numba), ratio compiled / numpy passes.",
        (Bars("latency", ("model",), ("numpy_passes_ms", "compiled_ms"), "ms per run"),)),
    "bench_llm": Page(
        "LLM generation on the CPU",
        "`benchmarks/bench_llm.py`: prefill and decode tokens/s of a 125 M-parameter Llama-shape model (random "
        "weights, float32, batch 1, a 128-token prompt, 32 new tokens) in `halfway.llm` from its checkpoint folder "
        "and from its dynamo ONNX export, beside ONNX Runtime running the export's past/present loop with IO "
        "binding and transformers eager, all on the same threads; the bandwidth bound is the weight bytes one "
        "token reads over the copy bandwidth measured in the run.",
        (Bars("speed", ("runtime",), ("decode_tokens_per_s",), "decode tokens/s"),)),
    "bench_startup": Page(
        "Command start-up",
        "`benchmarks/bench_startup.py`: the wall time of `halfway --help`, `halfway inspect` on a small Paddle "
        "model and on the demo's ONNX model, and `halfway ops`, each in a fresh process with its bytecode cached, "
        "beside `python -c pass` (the interpreter alone) and `python -c 'import onnx'` (what any command reading an "
        "ONNX model pays first). Over python is a command's best round less the interpreter's best; x python, the "
        "one over the other.",
        (Bars("startup", ("command",), ("median_s", "best_s"), "s per start"),)),
    "changes": Page(
        "Measured changes",
        "Figures of single changes, each measured before and after it in one process (A/B) when it was made; "
        "the commit named in each row holds the change and, in its message, the measurement. Figures of this kind "
        "that the code's own comments once gave are kept here, with the reason for the code staying in the code.",
        (Bars("changes", ("measure",), ("before", "after"), "speedup (x)", speedup=True),)),
}

UNITS = {"tokens_per_s": "tokens/s", "gb_per_s": "GB/s", "rows_per_s": "rows/s", "us_per_op": "µs per op", "us_per_folded_op": "µs per op",
         "tflops": "TFLOP/s", "gflops": "GFLOP/s", "mflop": "MFLOP", "_percent": "%", "_mib": "MiB", "_kib": "KiB",
         "_ms": "ms", "_us": "µs", "_s": "s"}
"""Column name endings and their units, the longer first: ``halfway_ms`` is shown as 'halfway (ms)'."""


@dataclass
class Run:
    path: Path
    doc: dict[str, Any]

    @property
    def date(self) -> str:
        return str(self.doc.get("date", ""))[:10]

    @property
    def benchmark(self) -> str:
        return str(self.doc["benchmark"])


def load_runs(data: Path) -> list[Run]:
    runs = []
    for path in sorted(data.glob("*.json")):
        doc = json.loads(path.read_text())
        for key in ("benchmark", "date", "machine", "tables"):
            if key not in doc:
                raise SystemExit(f"{path}: no {key!r} (benchmarks/results.py says what a run holds)")
        runs.append(Run(path, doc))
    return sorted(runs, key=lambda r: (r.doc["date"], r.path.name), reverse=True)


def machine_name(machine: dict[str, Any]) -> str:
    """The machine in a few words: its GPU, else its CPU and cores."""
    if machine.get("gpu"):
        return str(machine["gpu"])
    cores = f", {machine['cores']} cores" if machine.get("cores") else ""
    return f"{machine['cpu']}{cores}" if machine.get("cpu") else f"{machine.get('cores', '?')}-core machine"


def machine_text(machine: dict[str, Any]) -> str:
    """Everything recorded of the machine in a line."""
    parts = []
    if machine.get("gpu"):
        parts.append(str(machine["gpu"]) + (f" x {machine['gpus']}" if machine.get("gpus", 1) > 1 else ""))
    if machine.get("cpu"):
        parts.append(str(machine["cpu"]))
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores")
    if machine.get("isa"):
        parts.append(" ".join(machine["isa"]))
    if machine.get("kernels"):
        parts.append("kernels for " + ", ".join(f"{lib} {target}" for lib, target in machine["kernels"].items()))
    if machine.get("opencl_device"):
        parts.append(f"OpenCL device {machine['opencl_device']}")
    if machine.get("os"):
        parts.append(str(machine["os"]))
    if machine.get("load_average") is not None:
        parts.append(f"load average {machine['load_average']}")
    if machine.get("note"):
        parts.append(str(machine["note"]))
    return ", ".join(parts) or "not recorded"


def header(column: str) -> str:
    for ending, unit in UNITS.items():
        if column.endswith(ending):
            stem = column[: -len(ending)].strip("_").replace("_", " ")
            return f"{stem} ({unit})" if stem else unit
    return column.replace("_", " ")


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return " + ".join(cell(v) for v in value)
    return str(value).replace("|", "\\|")


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(header(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return lines


def matches(row: dict[str, Any], where: dict[str, Any]) -> bool:
    return all(row.get(k, False) == v for k, v in where.items())


def bar_name(run: Run, bars: Bars) -> str:
    return f"{run.path.stem}-{bars.table}.svg"


def history_name(benchmark: str, index: int) -> str:
    return f"{benchmark}-history-{index}.svg"


def history_points(runs: list[Run], history: History) -> dict[str, list[tuple[str, float, str]]]:
    """Series name -> (date and time, value, machine) in time order; a series needs two runs to be drawn."""
    series: dict[str, list[tuple[str, float, str]]] = {}
    for run in sorted(runs, key=lambda r: (r.doc["date"], r.path.name)):
        machine, when = machine_name(run.doc["machine"]), str(run.doc["date"])
        if history.summary:
            if history.table in run.doc["tables"] and history.value in run.doc.get("summary", {}):
                series.setdefault("", []).append((when, float(run.doc["summary"][history.value]), machine))
            continue
        for row in run.doc["tables"].get(history.table, []):
            if matches(row, history.where) and isinstance(row.get(history.value), (int, float)):
                name = f"{history.series} {row[history.series]}" if history.series else ""
                series.setdefault(name, []).append((when, float(row[history.value]), machine))
    return {k: v for k, v in series.items() if len(v) > 1}


def page(benchmark: str, runs: list[Run]) -> tuple[str, list[tuple[str, Any]]]:
    """The page's markdown and the plots it shows: (file name, what to draw)."""
    info = PAGES.get(benchmark, Page(benchmark, f"`benchmarks/{benchmark}.py`."))
    lines = [f"# {info.title}", "", info.about, "",
             f"Made by `scripts/bench_pages.py` from `docs/benchmarks/data/{benchmark}-*.json`; newest first.", ""]
    plots: list[tuple[str, Any]] = []
    drawn = [(i, h, history_points(runs, h)) for i, h in enumerate(info.history)]
    drawn = [(i, h, points) for i, h, points in drawn if points]
    if drawn:
        lines += ["## Over time", ""]
        for i, history, points in drawn:
            name = history_name(benchmark, i)
            plots.append((name, (history, points)))
            machines = sorted({m for series in points.values() for _, _, m in series if m})
            lines += [f"![{history.title}](img/{name})", "",
                      f"{history.title[:1].upper() + history.title[1:]}, by the date of each run ({', '.join(machines) or 'machines as below'}).", ""]
    for run in runs:
        doc = run.doc
        lines += [f"## {run.date} — {machine_name(doc['machine'])}", "", f"Machine: {machine_text(doc['machine'])}.", ""]
        facts = [f"`{doc['command']}`"] if doc.get("command") else []
        facts.append(f"source: {doc.get('source', 'measured')}")
        if doc.get("versions"):
            facts.append("versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()))
        facts.append(f"data: `{run.path.name}`")
        lines += [" · ".join(facts), ""]
        if doc.get("notes"):
            notes = str(doc["notes"]).rstrip(".")
            lines += [notes[:1].upper() + notes[1:] + ".", ""]
        for table, rows in doc["tables"].items():
            if not rows:
                continue
            if len(doc["tables"]) > 1:
                lines += [f"**{table}**", ""]
            lines += markdown_table(rows) + [""]
            for bars in info.bars:
                chosen = [r for r in rows if matches(r, bars.where)]
                if bars.table == table and len(chosen) > 1 and any(v in r for r in chosen for v in bars.values):
                    plots.append((bar_name(run, bars), (bars, chosen)))
                    lines += [f"![{table}, {run.date}](img/{bar_name(run, bars)})", ""]
        if doc.get("summary"):
            lines += ["Summary: " + ", ".join(f"{header(k)} {cell(v)}" for k, v in doc["summary"].items()) + ".", ""]
    return "\n".join(lines).rstrip() + "\n", plots


def index(pages: dict[str, list[Run]]) -> str:
    lines = ["# Benchmarks", "",
             "Each page holds the runs of one benchmark, dated and with the machine they ran on, newest first. "
             "The figures come from the benchmarks' own JSON output (`--json OUT`, written by "
             "`benchmarks/results.py`) kept in `docs/benchmarks/data/`; runs from before the benchmarks wrote JSON "
             "were transcribed from the README and commit messages of their day, and say so in their source. "
             "`scripts/bench_pages.py` makes these pages and their plots from those files.", "",
             "A figure is a measurement on one machine on one day: a shared 2-core virtual machine's timings move "
             "by tens of percent between runs, and a GPU's batch-1 latencies with the host's launch costs. "
             "Compare rows of one run; read across runs for trends.", "",
             "| page | runs | latest | machines |", "|---|---|---|---|"]
    for benchmark, runs in sorted(pages.items(), key=lambda kv: PAGES.get(kv[0], Page(kv[0], "")).title):
        title = PAGES.get(benchmark, Page(benchmark, "")).title
        machines = sorted({machine_name(r.doc["machine"]) for r in runs})
        lines.append(f"| [{title}]({benchmark}.md) | {len(runs)} | {runs[0].date} | {', '.join(machines)} |")
    lines += ["", "To add a run:", "", "```sh",
              ".venv/bin/python benchmarks/bench_modern.py --json docs/benchmarks/data/bench_modern-$(date +%F)-mymachine.json",
              ".venv/bin/python scripts/bench_pages.py",
              "```", ""]
    return "\n".join(lines)


def render(data: Path) -> tuple[dict[str, str], list[tuple[str, Any]]]:
    """Page file name -> markdown, and every plot to draw."""
    by_benchmark: dict[str, list[Run]] = {}
    for run in load_runs(data):
        by_benchmark.setdefault(run.benchmark, []).append(run)
    files, plots = {"index.md": index(by_benchmark)}, []
    for benchmark, runs in by_benchmark.items():
        files[f"{benchmark}.md"], drawn = page(benchmark, runs)
        plots += drawn
    return files, plots


def speedup(row: dict[str, Any], before: str, after: str) -> float:
    """How many times faster the change made ``row``'s measure (its ``unit`` says which way is better)."""
    ratio = float(row[before]) / float(row[after])
    return 1 / ratio if row.get("unit") in RATES else ratio


def draw(path: Path, what: Any) -> None:
    import datetime

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "halfway", "svg.fonttype": "none", "font.size": 9})
    if isinstance(what[0], Bars) and what[0].speedup:
        bars, rows = what
        labels = [f"{r.get('measure', '')} ({r.get('date', '')})" for r in rows]
        fig, ax = plt.subplots(figsize=(7.5, 0.8 + 0.22 * len(rows)))
        ax.barh(range(len(rows)), [speedup(r, *bars.values) for r in rows], color="tab:green")
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="grey", linewidth=0.8)
        ax.set_xlabel(bars.ylabel)
        ax.grid(axis="x", alpha=0.3)
    elif isinstance(what[0], Bars):
        bars, rows = what
        values = [v for v in bars.values if any(isinstance(r.get(v), (int, float)) for r in rows)]
        labels = ["\n".join(str(r.get(c, "")) for c in bars.labels) for r in rows]
        fig, ax = plt.subplots(figsize=(min(10.0, max(4.0, 0.5 * len(rows) * len(values) + 1.5)), 3.2))
        width = 0.8 / len(values)
        for i, column in enumerate(values):
            heights = [r.get(column) if isinstance(r.get(column), (int, float)) else 0 for r in rows]
            ax.bar([x + (i - (len(values) - 1) / 2) * width for x in range(len(rows))], heights, width,
                   label=header(column))
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylabel(bars.ylabel)
        ax.grid(axis="y", alpha=0.3)
        if len(values) > 1:
            ax.legend(fontsize=7)
    else:
        history, points = what
        fig, ax = plt.subplots(figsize=(6.0, 3.0))
        for name, series in points.items():
            times = [datetime.datetime.fromisoformat(t) for t, _, _ in series]
            ax.plot(times, [v for _, v, _ in series], marker="o", label=name or header(history.value))
        ax.set_ylabel(history.ylabel)
        ax.set_ylim(bottom=0)
        ax.set_title(history.title)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.grid(axis="y", alpha=0.3)
        if len(points) > 1:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def nav_missing(files: dict[str, str]) -> list[str]:
    nav = (ROOT / "mkdocs.yml").read_text()
    return [f"benchmarks/{name}" for name in files if f"benchmarks/{name}" not in nav]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DOCS / "data")
    parser.add_argument("--out", type=Path, default=DOCS)
    parser.add_argument("--check", action="store_true", help="compare the pages with what is written; draw nothing")
    args = parser.parse_args(argv)
    files, plots = render(args.data)
    missing = nav_missing(files)
    if args.check:
        stale = [name for name, text in files.items()
                 if not (args.out / name).exists() or (args.out / name).read_text() != text]
        for name in stale:
            print(f"docs/benchmarks/{name} is out of date: run scripts/bench_pages.py", file=sys.stderr)
        for name in missing:
            print(f"mkdocs.yml's nav does not list {name}", file=sys.stderr)
        return 1 if stale or missing else 0
    for name, text in files.items():
        (args.out / name).write_text(text)
    images = args.out / "img"
    wanted = {name for name, _ in plots}
    for old in images.glob("*.svg") if images.exists() else []:
        if old.name not in wanted:
            old.unlink()
    for name, what in plots:
        draw(images / name, what)
    print(f"{len(files)} pages, {len(plots)} plots in {args.out}")
    for name in missing:
        print(f"add {name} to mkdocs.yml's nav", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
