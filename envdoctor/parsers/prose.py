"""Versions and hardware stated in prose: "I'm on torch 2.1.0 with CUDA 12.1 and a 3090, driver 535.104".

A sentence states a fact when it names the component and one value of the component's form right after it
(``torch 2.1.0``, ``PyTorch 2.3.1+cu121``, ``CUDA 12.1``, ``driver 535.104.05`` / ``535.104 driver``, ``Python
3.10``), or a GPU the catalogue knows (``RTX 4090``, ``GTX 1080 Ti``, ``A100``, ``a 3090``). The guards:

* a sentence naming two values of one component ("upgraded from 1.13 to 2.0", "tried 11.8 and 12.1") states
  neither, and two sentences stating different values of one component leave it unstated;
* a sentence that is a question ("Does torch 2.1 support CUDA 12.4?"), a negation ("not on CUDA 12"), or a
  hypothesis or plan ("if I install torch 2.2", "planning to buy an RTX 5090") states nothing;
* a GPU is a GPU only when the catalogue (knowledge/ GPU catalogue, ``compat.gpu_by_name`` through
  :func:`envdoctor.parsers.statements.gpu_value`) knows the product; "the T5 model" or "my Tesla car" is none;
* a CUDA is torch's only when the sentence names torch too ("torch 2.1.0 with CUDA 12.1"); alone ("installed CUDA
  11.8") it is the toolkit's or the driver's as often, and states nothing;
* lines that are a log's, a traceback's or an error's (they quote versions of other things), a table's or a
  package listing's (columns aligned by runs of spaces or TABs), statements in list
  form (:mod:`envdoctor.parsers.statements` reads those) and URLs and paths are not prose.

A prose fact fills only a fact that nothing else read; each keeps the sentence it came from in its detail.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from envdoctor.knowledge import compat, versions

from ..lazyre import lazy_re
from ..model import Reading, ok
from ._util import not_read
from .statements import gpu_value, split_statement

SOURCE = "prose"
KEYS = ("torch.version", "torch.cuda_version", "nvml.driver_version", "nvml.gpus", "nvml.device_count",
        "python.version", "text.hang", "text.frameworks")

_MAX_LINE = 600
_SENTENCE_RE = lazy_re(r"(?<=[.!?;])\s+(?=\S)|\n")
# From a token's start only: tried at every position of a long token it was quadratic (400 KB: 2.9 s).
_URL_OR_PATH_RE = lazy_re(r"(?<!\S)\S*(?:://|[\\/])\S*")
# Component, then its value within a few filler words ("torch version is 2.1.0", "CUDA toolkit 12.1").
_FILLER = r"(?:\s+(?:version|ver\.?|is|of|v|toolkit|runtime|at|=|==|:|both|cpu|gpu|and|CPU|GPU))*\s*v?"
_MENTIONS: tuple[tuple[str, re.Pattern[str] | Any], ...] = (
    ("torch.version", lazy_re(r"\b(?:py)?torch" + _FILLER + r"(\d\.\d{1,2}(?:\.\d{1,2})?(?:\+[a-z0-9]+)?)(?!\w|\.\d)",
                              re.IGNORECASE)),
    ("cuda", lazy_re(r"\bcuda" + _FILLER + r"(\d{1,2}\.\d)(?:\.\d{1,3})?(?!\w|\.\d)", re.IGNORECASE)),
    ("nvml.driver_version", lazy_re(r"\b(?:nvidia\s+)?driver" + _FILLER + r"(\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?!\w|\.\d)"
                                    r"|(?<![\w.])(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\s+(?:nvidia\s+)?drivers?\b",
                                    re.IGNORECASE)),
    ("python.version", lazy_re(r"\bpython\s*3?" + _FILLER + r"(3\.\d{1,2}(?:\.\d{1,2})?)(?!\w|\.\d)", re.IGNORECASE)),
)
_GPU_TAIL = r"\s*[A-Z]{0,2}\d{2,4}\w*(?:\s+(?:(?i:ti|super|laptop|max-q|mobile)|Ada|D))*\b"
_GPU_RE = lazy_re(r"\b(?:NVIDIA\s+)?(?:GeForce|Quadro|Tesla|TITAN|Jetson)(?:\s+(?:RTX|GTX|GT))?" + _GPU_TAIL +
                  r"|\b(?:NVIDIA\s+)?(?:RTX|GTX)" + _GPU_TAIL +
                  r"|\b(?:NVIDIA\s+)?(?:A|H|L|B|V|T|P|K|GH|GB)\d{1,3}(?:-[A-Z0-9]+)*\b(?:\s+(?:PCIe|SXM\d?|NVL))?", 0)
# "a 3090", "my 4090 Ti", "two 3080s": a bare GeForce model number after an article or a possessive.
_BARE_GPU_RE = lazy_re(r"\b(a|an|my|our|the|one|single|with|on)\s+((?:[1-5]0[5-9]0|16[56]0|9[6-8]0)(?:\s*Ti)?)s?\b",
                       re.IGNORECASE)
# "with"/"on"/"the" before a number is a GPU only in a sentence about a GPU ("trained on 1080 images" is not);
# and a number that counts the plural noun after it ("a 1080 pixel image", "my 2080 samples") is none.
_GPU_WORD_RE = lazy_re(r"\b(?:gpus?|cards?|graphics|geforce|nvidia|vram|cuda)\b", re.IGNORECASE)
_COUNTED_NOUN_RE = lazy_re(r"\s*(?:pixels?|px|images?|samples?|steps?|tokens?|epochs?|iterations?|files?|rows?|examples?|"
                           r"frames?|points?|words?|batch(?:es)?|items?|records?|[kmg]b|mb/s|hz|mhz|p)\b", re.IGNORECASE)
# "2 nvidia A40", "four A100s", "8x H100": how many, right before the product.
_COUNT_BEFORE_RE = lazy_re(r"(?<![\d.,])(\d{1,2}|two|three|four|five|six|seven|eight)\s*(?:x\s*|×\s*)?(?:nvidia\s+)?$",
                           re.IGNORECASE)
_NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_QUESTION_RE = lazy_re(r"^(?:does|do|did|is|are|can|could|should|which|what|how|will|would|has|have|why|anyone|any)\b",
                       re.IGNORECASE)
_NEGATION_RE = lazy_re(r"\b(?:not|no|without|never|none|instead|rather|neither|nor|cannot)\b|n't\b", re.IGNORECASE)
_HYPOTHESIS_RE = lazy_re(r"\b(?:if|would|should|plan|planning|plans|want|wants|wanted|going to|buy|buying|"
                         r"considering|recommend|recommended|e\.g|for example|such as|requires?|required|supports?|"
                         r"supported|compatible|upgrade to|downgrade to|switch to|try|trying|tried)\b", re.IGNORECASE)
# A line that is a log's, a traceback's or an error's, not a person's sentence.
_NOT_PROSE_RE = lazy_re(r"^\s*(?:File \"|Traceback|\[|\d{4}-\d\d-\d\d|\d\d:\d\d|(?:DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b|[\w.]+(?:Error|Warning|"
                        r"Exception)\b|>>>|\$|#)|Error:|Warning:|\bat 0x|\bline \d+|Found GPU\s*\d|\S {3,}\S|\t", 0)
_WORD_RE = lazy_re(r"[a-z]{2,}")
#: A line holds a fact only if it names a component or holds a model number: others are not looked at again.
_HINT_WORDS = ("torch", "cuda", "driver", "python", "rtx", "gtx", "quadro", "tesla", "titan", "jetson")
_MODEL_RE = lazy_re(r"\b[A-Za-z]{1,2}\d{2,3}\b|\b\d{4}\b")


def _hint(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in _HINT_WORDS) or bool(_MODEL_RE.search(text))


def _bare_gpu(number: str) -> str:
    digits = number.replace(" ", "")
    series = int(digits[:2]) if len(digits.rstrip("Ti")) == 4 else 0
    return f"{'RTX' if series >= 20 and not digits.startswith('16') else 'GTX'} {number}"


def _sentences(lines: Sequence[str]) -> list[str]:
    out: list[str] = []
    for line in dict.fromkeys(line.strip() for line in lines):  # a repeated line says nothing new
        text = line
        if not text or len(text) > _MAX_LINE or not _hint(text) or len(_WORD_RE.findall(text)) < 3:
            continue  # cheap tests first: no component's word, no model number, or no sentence
        if _NOT_PROSE_RE.search(text) or split_statement(text) is not None:
            continue
        text = _URL_OR_PATH_RE.sub(" ", text)
        out.extend(s.strip() for s in _SENTENCE_RE.split(text) if s.strip())
    return out


def _states_nothing(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION_RE.match(sentence) or _NEGATION_RE.search(sentence)
                                                   or _HYPOTHESIS_RE.search(sentence))


def _gpus(sentence: str) -> list[tuple[str, int, int, Any]]:
    found: list[tuple[str, int, int, Any]] = []
    spans = [(m.group(0), m.start()) for m in _GPU_RE.finditer(sentence)]
    about_a_gpu = _GPU_WORD_RE.search(sentence) is not None
    spans += [(_bare_gpu(m.group(2)), m.start(2)) for m in _BARE_GPU_RE.finditer(sentence)
              if not re.match(r"(?:RTX|GTX)\s*$", sentence[max(0, m.start(2) - 4):m.start(2)])
              and (about_a_gpu or m.group(1).lower() not in ("with", "on", "the"))
              and not _COUNTED_NOUN_RE.match(sentence, m.end())]
    for name, start in sorted(spans, key=lambda s: s[1]):
        said = gpu_value(name)
        if said is None or compat.gpu_by_name(said[0]) is None:
            continue  # a product the catalogue does not know ("RTX 9999", "T5") is no GPU
        if said[0] not in [f[0] for f in found]:
            if said[2] == 1 and (count := _COUNT_BEFORE_RE.search(sentence[max(0, start - 24):start])):
                word = count.group(1).lower()
                said = (said[0], said[1], int(word) if word.isdigit() else _NUMBERS[word], said[3])
            found.append(said)
    return found


def statements(lines: Sequence[str]) -> dict[str, tuple[Any, str]]:
    """fact -> (value, the sentence) for every fact the prose states once, with one value."""
    said: dict[str, set[Any]] = {}
    where: dict[str, tuple[Any, str]] = {}
    for sentence in _sentences(lines):
        if _states_nothing(sentence):
            continue
        named_torch = False
        for fact, pattern in _MENTIONS:
            values = {next(g for g in m.groups() if g) for m in pattern.finditer(sentence)}
            if fact == "torch.version":
                values = {v for v in values if v.split(".")[0] in ("1", "2")}
            if fact == "torch.version" and values:
                named_torch = True
            if fact == "cuda" and not named_torch:
                continue  # a CUDA said without torch beside it is the toolkit's or the driver's as often as torch's
            if len(values) == 1:
                value = next(iter(values))
                said.setdefault(fact, set()).add(value)
                where.setdefault(fact, (value, sentence[:160]))
            elif len(values) > 1:
                said.setdefault(fact, set()).update(values)  # "from 1.13 to 2.0": neither
        gpus = _gpus(sentence)
        if len(gpus) == 1:
            said.setdefault("gpu", set()).add(gpus[0][0])
            where.setdefault("gpu", (gpus[0], sentence[:160]))
        elif gpus:
            said.setdefault("gpu", set()).update(g[0] for g in gpus)
    return {fact: where[fact] for fact, values in said.items() if len(values) == 1 and fact in where}


# A person saying the program stopped making progress: "training hangs at the first all_reduce", "it gets stuck",
# "freezes after the first epoch", "deadlocks". "If it hangs, …" states nothing.
# "freezes" only: "froze", "frozen" and "freezing" are what training does to layers ("the backbone frozen").
_HANG_RE = lazy_re(r"\b(?:hangs?|hung|hanging|freezes|stuck|deadlock(?:s|ed)?)\b", re.IGNORECASE)
_HANG_HYPOTHESIS_RE = lazy_re(r"\b(?:if|in case|whether|might|may|could|to avoid|to prevent)\b", re.IGNORECASE)
# A hang the sentence says happens with a workaround set ("even with NCCL_P2P_DISABLE=1 it hangs") is not one the
# workaround cured: that sentence states no hang for the checks that read a cure from it.
_HANG_DESPITE_RE = lazy_re(r"\b(?:even with|still|despite|also with|regardless)\b|NCCL_\w+=", re.IGNORECASE)


def hang(lines: Sequence[str]) -> str | None:
    """The first sentence of a person's that says the program hangs (stops making progress), or None."""
    for line in dict.fromkeys(line.strip() for line in lines):
        if not line or len(line) > _MAX_LINE or not _HANG_RE.search(line) or _NOT_PROSE_RE.search(line):
            continue
        for sentence in _SENTENCE_RE.split(_URL_OR_PATH_RE.sub(" ", line)):
            if _HANG_RE.search(sentence) and not _HANG_HYPOTHESIS_RE.search(sentence) and \
                    not _HANG_DESPITE_RE.search(sentence) and \
                    len(_WORD_RE.findall(sentence)) >= 3:
                return sentence.strip()[:160]
    return None


# "TensorFlow 2.13.0", "tensorflow version 2.15": a framework other than torch said in a sentence.
_TENSORFLOW_RE = lazy_re(r"\btensorflow(?:-gpu)?" + _FILLER + r"(2\.\d{1,2}(?:\.\d{1,2})?)(?!\w|\.\d)", re.IGNORECASE)


def tensorflow(lines: Sequence[str]) -> tuple[str, str] | None:
    """(version, sentence) when a person's sentences name one TensorFlow version as theirs, else None."""
    found: dict[str, str] = {}
    for line in dict.fromkeys(line.strip() for line in lines):
        if not line or len(line) > _MAX_LINE or "ensorflow" not in line.lower() or _NOT_PROSE_RE.search(line) \
                or split_statement(line) is not None:
            continue
        for sentence in _SENTENCE_RE.split(_URL_OR_PATH_RE.sub(" ", line)):
            if sentence.rstrip().endswith("?") or _QUESTION_RE.match(sentence):
                continue
            for m in _TENSORFLOW_RE.finditer(sentence):
                # a hypothesis before the version ("if I upgrade to TensorFlow 2.11") says nothing about the
                # reporter's; one after it ("I am using TensorFlow 2.8 but every time I try …") does not undo it
                if not _HYPOTHESIS_RE.search(sentence[:m.end()]):
                    found.setdefault(m.group(1), sentence.strip()[:160])
    return next(iter(found.items())) if len(found) == 1 else None



def parse(lines: Sequence[str], readings: dict[str, Reading]) -> None:
    """Fill the facts no report or statement read with what the prose states."""
    said = statements(lines)
    frameworks = readings.get("text.frameworks")
    if (not frameworks or not frameworks.ok or "tensorflow" not in (frameworks.value or {})) and \
            (tf := tensorflow(lines)) is not None:
        merged = {**(dict(frameworks.value) if frameworks is not None and frameworks.ok and frameworks.value else {}),
                  "tensorflow": tf[0]}
        readings["text.frameworks"] = ok(merged, frameworks.source if frameworks is not None and frameworks.ok
                                         else SOURCE, f"TensorFlow said in prose: {tf[1]!r}")
    if (stuck := hang(lines)) is not None:
        readings["text.hang"] = ok(stuck, SOURCE, f"said in prose: {stuck!r}")
    for fact in ("torch.version", "nvml.driver_version", "python.version"):
        if fact in said and not_read(readings, fact):
            value, sentence = said[fact]
            readings[fact] = ok(value, SOURCE, f"said in prose: {sentence!r}")
    torch = readings.get("torch.version")
    if not_read(readings, "torch.cuda_version"):
        tag = versions.local_tag(str(torch.value)) if torch is not None and torch.ok and torch.value else None
        if torch is not None and torch.ok and torch.source == SOURCE and (tag == "cpu" or versions.variant_cuda(tag)):
            readings["torch.cuda_version"] = ok(versions.variant_cuda(tag), SOURCE, f"torch's version tag, "
                                                f"{torch.detail}")
        elif "cuda" in said and not tag:
            # "torch 2.1.0 with CUDA 12.1": a CUDA said in the sentence that names torch is torch's.
            value, sentence = said["cuda"]
            readings["torch.cuda_version"] = ok(value, SOURCE, f"said in prose beside torch: {sentence!r}")
    if "gpu" in said and not_read(readings, "nvml.gpus"):
        (name, index, count, cc), sentence = said["gpu"]
        records = [{"index": i, "name": name, **({"compute_capability": versions.cc_text(cc)} if cc else {})}
                   for i in range(index, index + count)]
        readings["nvml.gpus"] = ok(records, SOURCE, f"said in prose: {sentence!r}")
        if not_read(readings, "nvml.device_count"):
            readings["nvml.device_count"] = ok(len(records), SOURCE, f"said in prose: {sentence!r}")


__all__ = ["KEYS", "SOURCE", "hang", "parse", "statements", "tensorflow"]
