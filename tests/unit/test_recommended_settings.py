"""The recommended settings the package ships (``shared/recommended_mitm.toml``,
read when there is no mitm.toml in the current directory and written by
``obsmask init``): the checkout's mitm.toml, byte for byte, and its spec
profile gives the built-in defaults back."""

from __future__ import annotations

import tomllib

from obsmask_core.conversation.settings.policy import MaskPolicy, policy_values
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG, load_config
from obsmask_core.shared.settings import build
from support.processes import REPO


def test_the_package_ships_the_checkouts_mitm_toml_byte_for_byte():
    """mitm.toml at the top of the checkout is the source: after editing it,
    cp mitm.toml addons/obsmask_core/shared/recommended_mitm.toml."""
    assert RECOMMENDED_CONFIG.read_bytes() == (REPO / "mitm.toml").read_bytes(), (
        "cp mitm.toml addons/obsmask_core/shared/recommended_mitm.toml")


def test_pyproject_ships_the_recommended_settings_and_the_model_table_as_package_data():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = pyproject["tool"]["setuptools"]["package-data"]["obsmask_core"]
    assert "shared/recommended_mitm.toml" in shipped
    assert "conversation/billing/model_prices.toml" in shipped


def test_the_spec_profile_gives_back_every_built_in_default():
    config = load_config(str(RECOMMENDED_CONFIG))
    assert build(MaskPolicy, policy_values(config, "spec")) == MaskPolicy()
    assert build(MaskPolicy, policy_values(config, "")) != MaskPolicy()
