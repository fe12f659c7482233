"""The fabric of a scenario: :class:`FabricSpec`, a template and its builder parameters.

Builder parameters are validated (names and values) without building the fabric, so a
mistyped ``segmnts`` is refused before any work: ``fabric.segmnts: not a parameter of hpn7``.

Examples
--------
>>> spec = FabricSpec.model_validate({"template": "fat_tree", "k": 4})
>>> spec.options(), spec.build().n_gpus
({'k': 4}, 16)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpnsim.errors import InputError

__all__ = ["FabricSpec"]


class FabricSpec(BaseModel):
    """The fabric: a template and its builder parameters (``hpnsim fabric`` lists them), or
    ``topology``, a Lingjun-format CSV file (one row per host with its ToR, Agg and core).

    Builder parameters are the keys of the template's builder (``segments``, ``pods``,
    ``dual_tor``, ``uplink_speed`` ...); ``gpus`` sizes the fabric for that many GPUs.
    """

    model_config = ConfigDict(extra="allow")

    template: str = Field("hpn7", description="hpn7, dcn_plus, rail_optimized, rail_only, "
                                              "fat_tree or lingjun")
    topology: str | None = Field(None, description="a Lingjun topology CSV (template lingjun)")
    units: dict[str, dict[str, Any]] | None = Field(
        None, description="bill-of-materials overrides {unit: {power_w, cost_usd}} (as "
                          "hpnsim fabric --units)")

    @field_validator("units")
    @classmethod
    def _known_units(cls, value: dict | None) -> dict | None:
        from hpnsim.fabrics.bom import validate_units

        if value is not None:
            try:
                validate_units(value)
            except InputError as exc:
                raise ValueError(f"bad unit table: {exc.message}") from None
        return value

    @field_validator("template")
    @classmethod
    def _known_template(cls, value: str) -> str:
        from hpnsim.fabrics.registry import TEMPLATES

        if value not in TEMPLATES:
            raise ValueError(f"unknown fabric {value!r}; choose from {', '.join(TEMPLATES)}")
        return value

    @model_validator(mode="after")
    def _known_parameters(self) -> FabricSpec:
        from hpnsim.fabrics.registry import typed_options

        if self.topology is not None and self.template not in ("hpn7", "lingjun"):
            raise ValueError("topology files are Lingjun CSVs: use template lingjun")
        options = self.options()
        gpus = options.pop("gpus", None)
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int | str)):
            raise ValueError(f"gpus: must be a whole number of GPUs, got {gpus!r}")
        try:
            typed_options(self.resolved_template, options)
        except InputError as exc:
            raise ValueError(f"{exc.field}: {exc.message}") from None
        return self

    @property
    def resolved_template(self) -> str:
        return "lingjun" if self.topology is not None else self.template

    def options(self) -> dict[str, Any]:
        """Builder parameters (everything but ``template``), ``topology`` as ``path``."""
        out = dict(self.model_extra or {})
        if self.topology is not None:
            out["path"] = self.topology
        return out

    def build(self):
        """Build the fabric (:func:`hpnsim.fabrics.build_fabric`), with ``units``."""
        from hpnsim.fabrics import build_fabric

        return build_fabric(self.resolved_template, self.options(), meta={"units": self.units})
