"""Model catalog: the named models of ``catalog/models.yaml`` and users' own, looked up by name.

Each entry is a :class:`~hpnsim.workloads.model_spec.ModelSpec` (transformer, dense or MoE,
or CNN), whose docstring gives the conventions of its parameter and FLOP counts. The catalog
lives in ``catalog/models.yaml``; users add their own with :func:`load_yaml`; :func:`get`
looks a model up by name.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from hpnsim.errors import InputError, read_user_text
from hpnsim.workloads.model_spec import ModelSpec

__all__ = ["ModelSpec", "from_dict", "get", "load_yaml", "names"]


_FIELDS = {f.name for f in dataclasses.fields(ModelSpec)}


def from_dict(name: str, fields: dict) -> ModelSpec:
    """Build a :class:`ModelSpec` from a mapping (as read from YAML); unknown keys are errors.

    >>> from_dict("t", {"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 100}).layers
    2
    """
    if not isinstance(fields, dict):
        raise InputError(name, f"a model must be a mapping of fields, got {type(fields).__name__}")
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise InputError(f"{name}.{unknown[0]}",
                         f"unknown field; allowed: {', '.join(sorted(_FIELDS - {'name'}))}")
    values = {k: v for k, v in fields.items() if k != "name"}
    for key, value in values.items():
        values[key] = _coerce_number(f"{name}.{key}", key, value)
    try:
        return ModelSpec(name=str(fields.get("name", name)), **values)
    except TypeError as error:
        raise InputError(name, str(error)) from None


_INT_FIELDS = {f.name for f in dataclasses.fields(ModelSpec) if "int" in str(f.type)}
_FLOAT_FIELDS = {f.name for f in dataclasses.fields(ModelSpec) if "float" in str(f.type)}


def _coerce_number(field: str, key: str, value):
    # YAML 1.1 reads "70e9" as a string; accept numeric text and integral floats.
    if key not in _INT_FIELDS | _FLOAT_FIELDS or isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(field, f"must be a number, got {value!r}") from None
    if key in _INT_FIELDS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _parse_models(data, source: str) -> dict[str, ModelSpec]:
    if not isinstance(data, dict) or not data:
        raise InputError(source, "expected a mapping of model name -> fields, or one model with 'name'")
    if "name" in data and isinstance(data["name"], str):
        spec = from_dict(data["name"], data)
        return {spec.name: spec}
    return {str(key): from_dict(str(key), value) for key, value in data.items()}


@cache
def _catalog() -> dict[str, ModelSpec]:
    text = resources.files("hpnsim.workloads").joinpath("catalog/models.yaml").read_text()
    return _parse_models(yaml.safe_load(text), "catalog/models.yaml")


def names() -> list[str]:
    """Names of the catalog models.

    >>> "llama3-70b" in names()
    True
    """
    return sorted(_catalog())


def load_yaml(path: str | Path) -> dict[str, ModelSpec]:
    """Read user models from a YAML file: ``{name: {fields}}`` or a single ``{name: ..., fields}``.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.yaml")
    >>> _ = open(path, "w").write("name: mini\\nlayers: 2\\nhidden: 64\\nheads: 4\\nffn: 256\\nvocab: 100\\n")
    >>> load_yaml(path)["mini"].hidden
    64
    """
    path = Path(path)
    from hpnsim.errors import read_user_yaml

    text = read_user_text(path, "model-file", "YAML file")
    try:
        data, _ = read_user_yaml(text, "model-file")
    except InputError as error:
        raise InputError("model-file", f"{path}: {error.message}" if error.field == "model-file"
                         else f"{path}: {error.field}: {error.message}") from None
    return _parse_models(data, f"model-file {path}")


def get(name: str | ModelSpec, extra: dict[str, ModelSpec] | None = None) -> ModelSpec:
    """Look a model up by name (``extra`` models from :func:`load_yaml` first, then the catalog).

    Examples
    --------
    >>> get("llama3-70b").layers
    80
    >>> get("nope")
    Traceback (most recent call last):
    ...
    hpnsim.errors.InputError: model: unknown model 'nope'; known: bert-large, deepseek-moe-16b, gpt3-175b, llama-13b, llama-65b, llama-7b, llama3-405b, llama3-70b, llama3-8b, mixtral-8x7b, resnet-50
    """
    if isinstance(name, ModelSpec):
        return name
    pool = {**_catalog(), **(extra or {})}
    if name not in pool:
        raise InputError("model", f"unknown model {name!r}; known: {', '.join(sorted(pool))}")
    return pool[name]
