"""Rescale an FP8 (OCP e4m3fn) checkpoint into the range Neuron's FP8 can hold, and find the modules
it keeps in BF16.

Why, and how, as Neuron documents it (aws-neuron/neuronx-distributed v2.26.0, commit fecfe75b,
src/neuronx_distributed/quantization/README_rescaling_fp8_for_neuron.md, unchanged since Neuron
2.21 and linked from the 405B tutorial): Neuron's E4M3 (FP8_EXP4) spans +/-240 where OCP e4m3fn
spans +/-448, so a weight w with scale s becomes w' = fp8(bf16(w) / F) with s' = s * F, where
F = 448 / 240: every weight fits Neuron's range and w' * s' still equals w * s up to FP8 rounding.
The README's script asserts the weights are float8_e4m3fn and the scales float32, and verifies
the dequantized weights before and after; this module does the same, with its own code:

- it works on the safetensors file directly (8-byte little-endian header length, a JSON header of
  dtype, shape and byte offsets, then the data): the rescaled tensors keep their dtype and shape, so
  the header and every offset stay as they are and one tensor at a time is held in memory;
- it reads the weights through ml_dtypes' float8_e4m3fn and bfloat16, dividing in float32 and
  rounding to bfloat16 first, as torch's bfloat16 division does, then to e4m3fn;
- the check bounds the change of every dequantized weight by FP8's rounding (3 mantissa bits: half
  a step is 1/16 of the value, 2^-10 below the smallest normal), which a wrong factor, a wrong
  scale layout or an overflow fails.

The modules it keeps in BF16 are read from the same headers: a linear module (an attention or MLP
block of a layer, or the LM head) whose weights hold no F8_E4M3 tensor. NxD Inference needs that
list (modules_to_not_convert; stackconfig/semantics.py), in the 405B tutorial's file format.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import ml_dtypes
import numpy as np

FP8_SCALING_FACTOR = 448.0 / 240.0
NEURON_FP8_MAX = 240.0
FP8_HALF_STEP = 1 / 16
FP8_SMALLEST_HALF_STEP = 2.0 ** -10
_MODULE = re.compile(r"^(?:model\.)?(layers\.\d+\.(?:mlp|self_attn))\.[\w.]+\.weight$")


class RescaleError(RuntimeError):
    """The checkpoint is not what the rescaling expects, or the result does not verify."""


def read_header(path: Path) -> tuple[dict[str, Any], int]:
    """The safetensors header (without __metadata__) and the offset its data starts at."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return header, 8 + length


def _read(handle, start: int, info: dict[str, Any]) -> bytes:
    begin, end = info["data_offsets"]
    handle.seek(start + begin)
    return handle.read(end - begin)


def rescale_pair(weight: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w' = e4m3fn(bf16(w / F)), s' = s * F, as Neuron's README computes them."""
    divided = (weight.astype(np.float32) / np.float32(FP8_SCALING_FACTOR)).astype(ml_dtypes.bfloat16)
    return divided.astype(ml_dtypes.float8_e4m3fn), (scale * np.float32(FP8_SCALING_FACTOR)).astype(np.float32)


def verify_pair(name: str, weight: np.ndarray, scale: np.ndarray, new_weight: np.ndarray, new_scale: np.ndarray) -> float:
    """Dequantize before and after (each row by its scale); raise unless every weight moved by at
    most FP8's rounding and fits Neuron's range. Returns the largest |w'|."""
    rows = scale.reshape(-1, 1) if scale.size == weight.shape[0] else scale.reshape(1, -1)
    before = weight.astype(np.float32) * rows
    after = new_weight.astype(np.float32) * new_scale.reshape(rows.shape)
    largest = float(np.max(np.abs(new_weight.astype(np.float32)))) if new_weight.size else 0.0
    if not np.all(np.isfinite(after)) or largest > NEURON_FP8_MAX:
        raise RescaleError(f"{name}: rescaled weights leave Neuron's FP8 range (largest |w'| = {largest})")
    tolerance = np.abs(before) * (FP8_HALF_STEP + 2.0 ** -8) + np.abs(new_scale.reshape(rows.shape)) * FP8_SMALLEST_HALF_STEP
    if np.any(np.abs(after - before) > tolerance):
        worst = float(np.max(np.abs(after - before) - tolerance))
        raise RescaleError(f"{name}: dequantized weights moved beyond FP8 rounding after rescaling (by {worst:g})")
    return largest


@dataclass(frozen=True)
class RescaleResult:
    tensors: int
    """Weight/scale pairs rescaled."""
    largest: float
    """The largest |w'| written (at most 240)."""


def rescale_file(source: Path, target: Path) -> RescaleResult:
    """Write `target`: `source` with every FP8 weight and its scale rescaled, all else byte for byte
    (one shard's rescaled tensors are held in memory, a few GiB at most)."""
    header, start = read_header(source)
    replacements: dict[str, bytes] = {}
    largest = 0.0
    with source.open("rb") as handle:
        for scale_name in sorted(n for n in header if n.endswith(".weight_scale")):
            weight_name = scale_name[: -len("_scale")]
            weight_info, scale_info = header.get(weight_name), header[scale_name]
            if weight_info is None or weight_info["dtype"] != "F8_E4M3" or scale_info["dtype"] != "F32":
                found = weight_info["dtype"] if weight_info else "no weight"
                raise RescaleError(f"{weight_name}: expected F8_E4M3 weights with F32 scales, found {found} and {scale_info['dtype']}")
            weight = np.frombuffer(_read(handle, start, weight_info), dtype=ml_dtypes.float8_e4m3fn).reshape(weight_info["shape"])
            scale = np.frombuffer(_read(handle, start, scale_info), dtype=np.float32).reshape(scale_info["shape"])
            new_weight, new_scale = rescale_pair(weight, scale)
            largest = max(largest, verify_pair(weight_name, weight, scale, new_weight, new_scale))
            replacements[weight_name], replacements[scale_name] = new_weight.tobytes(), new_scale.tobytes()
        with target.open("wb") as out:
            handle.seek(0)
            out.write(handle.read(start))
            position = 0
            for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
                if info["data_offsets"][0] != position:
                    raise RescaleError(f"{source.name}: tensor {name} does not follow the one before it; not a safetensors layout")
                out.write(replacements.get(name) or _read(handle, start, info))
                position = info["data_offsets"][1]
    return RescaleResult(len(replacements) // 2, largest)


def linear_modules(headers: Iterable[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """(every linear module, those holding FP8 weights), named as NxD Inference names them."""
    modules, fp8 = set(), set()
    for header in headers:
        for name, info in header.items():
            match = _MODULE.match(name)
            module = match.group(1) if match else ("lm_head" if name == "lm_head.weight" else None)
            if module:
                modules.add(module)
                if info["dtype"] == "F8_E4M3":
                    fp8.add(module)
    return modules, fp8


def modules_to_not_convert(headers: Iterable[dict[str, Any]]) -> list[str]:
    """The linear modules the checkpoint keeps in BF16, sorted as layers then the LM head."""
    modules, fp8 = linear_modules(headers)
    bf16 = modules - fp8
    if not fp8:
        raise RescaleError("the checkpoint holds no F8_E4M3 weights: it is not an FP8 checkpoint")
    return sorted(bf16, key=lambda m: (m == "lm_head", [int(p) if p.isdigit() else p for p in m.split(".")]))


def modules_file(target: list[str]) -> dict[str, Any]:
    """The 405B tutorial's modules_to_not_convert.json layout (a "model" list; NxDI's
    inference_demo reads data["model"]["modules_to_not_convert"], v0.6.10598 L387-398)."""
    return {"model": {"modules_to_not_convert": target}}
