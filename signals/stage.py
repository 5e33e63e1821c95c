"""The stage protocol and registry shared by every codec stage.

A stage (a quantizer, a predictor, ...) turns arrays into arrays and back,
and describes itself with a plain-JSON config, as numcodecs codecs do
(https://numcodecs.readthedocs.io/en/stable/abc.html): ``get_config()``
returns ``{"kind": NAME, **parameters}`` (fitted state included), and
:func:`stage_from_config` rebuilds the stage from it through the registry.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound=type)

REGISTRY: dict[str, Any] = {}


def register(cls: T) -> T:
    """Class decorator: make ``cls`` findable by its ``kind``."""
    kind = cls.kind  # type: ignore[attr-defined]
    if kind in REGISTRY and REGISTRY[kind] is not cls:
        raise ValueError(f"stage kind {kind!r} is registered twice")
    REGISTRY[kind] = cls
    return cls


class Stage:
    """Base class: ``kind`` names the stage; ``get_config``/``from_config`` round-trip it."""

    kind: ClassVar[str]

    def get_params(self) -> dict[str, Any]:
        """Hyperparameters, as given to ``__init__`` (JSON values)."""
        return {}

    def get_config(self) -> dict[str, Any]:
        """``{"kind": ..., **parameters}``: plain JSON that :meth:`from_config` takes back."""
        return {"kind": self.kind, **self.get_params()}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Stage:
        """Rebuild the stage from :meth:`get_config` output."""
        return cls(**{k: v for k, v in config.items() if k != "kind"})


def stage_from_config(config: dict[str, Any], family: str = "stage") -> Any:
    """Rebuild any registered stage from its config.

    Raises
    ------
    ValueError
        If ``config`` is not a dict with a registered ``kind``.
    """
    if not isinstance(config, dict):
        raise ValueError(f"a {family} config must be a JSON object, got {type(config).__name__}")
    cls = REGISTRY.get(str(config.get("kind")))
    if cls is None:
        raise ValueError(f"unknown {family} kind {config.get('kind')!r}; "
                         f"known: {', '.join(sorted(REGISTRY))}")
    return cls.from_config(config)
