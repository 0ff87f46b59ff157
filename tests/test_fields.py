"""The DCGM field catalogue (generator/gpumon/data/dcgm_fields.json): what it holds, where it comes from,
and that a spec naming any catalogued field renders while an unknown one only warns."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpumon import fields
from gpumon.render import render as render_files
from gpumon.spec import parse_spec

from .small_spec import BASE

ROOT = Path(__file__).resolve().parent.parent
#: local copies of the upstream sources the catalogue is generated from (absent on most machines)
DCGM_GIT = os.environ.get("GPUMON_DCGM_GIT", "/work/.mirror/NVIDIA+DCGM/repo")
EXPORTER_REF = os.environ.get("GPUMON_EXPORTER_REF", "/work/shared/reference/dcgm-exporter")

SPEC = BASE + """\
  - name: DCGM_FI_PROF_NVLINK_TX_BYTES
    kind: gauge
    unit: bytes_per_second
    presence: optional
  - name: DCGM_FI_DEV_POWER_USAGE_INSTANT
    kind: gauge
    unit: watts
    presence: optional
    range: [1, 2000]
"""


def test_catalogue_has_dcgm_ids_types_units_and_releases():
    cat = fields.catalogue()
    assert len(cat) > 1000
    nvlink, instant = cat["DCGM_FI_PROF_NVLINK_TX_BYTES"], cat["DCGM_FI_DEV_POWER_USAGE_INSTANT"]
    assert (nvlink.field_id, nvlink.type) == (1011, "int64")
    assert (instant.field_id, instant.type, instant.unit) == (157, "double", "W")
    assert "4.6.0" in instant.dcgm and "2.4.7" not in instant.dcgm      # added in DCGM 3.x
    temp = cat["DCGM_FI_DEV_GPU_TEMP"]
    assert (temp.field_id, temp.unit, temp.kind) == (150, "C", "gauge")
    assert temp.exporter == ("2.4.7-2.6.11", "3.3.9-3.6.1", "4.0.0-4.0.1", "4.5.3-4.8.2")
    # dcgm-exporter's own fields are there too, without a DCGM id
    assert cat["DCGM_EXP_XID_ERRORS_COUNT"].field_id is None and cat["DCGM_EXP_XID_ERRORS_COUNT"].kind == "counter"


def test_catalogue_names_its_sources():
    src = fields.catalogue_document()["sources"]
    assert src["dcgm"]["repository"] == "https://github.com/NVIDIA/DCGM"
    assert set(src["dcgm"]["commits"]) == set(src["dcgm"]["tags"])
    assert src["dcgm_exporter"]["repository"] == "https://github.com/NVIDIA/dcgm-exporter"
    assert set(src["dcgm_exporter"]["commits"]) == set(src["dcgm_exporter"]["tags"])


def test_every_field_of_the_bundled_csvs_is_catalogued():
    for csv in ("default-counters.csv", "dcp-metrics-included.csv"):
        missing = set(fields.read_csv(csv)) - set(fields.catalogue())
        assert not missing, (csv, missing)


def test_spec_with_catalogued_fields_renders_without_warnings():
    spec = parse_spec(SPEC, "spec.yaml")
    assert spec.warnings == ()
    rules = render_files(spec)["rules/gpumon.rules.yaml"]
    assert "DCGM_FI_PROF_NVLINK_TX_BYTES" in rules and "DCGM_FI_DEV_POWER_USAGE_INSTANT" in rules


def test_field_outside_the_catalogue_is_a_warning_with_a_hint():
    spec = parse_spec(SPEC.replace("POWER_USAGE_INSTANT", "POWER_USAGE_INSTNT"), "spec.yaml")
    assert [str(w) for w in spec.warnings] == [
        "spec.yaml:13:11: metrics[2].name: warning: 'DCGM_FI_DEV_POWER_USAGE_INSTNT' is not in gpumon's DCGM field "
        "catalogue (DCGM 2.4.7 to 4.6.0, dcgm-exporter 2.4.7 to 4.8.2); its kind: gauge and unit: watts are taken "
        "as written; did you mean 'DCGM_FI_DEV_POWER_USAGE_INSTANT'?"]
    assert "DCGM_FI_DEV_POWER_USAGE_INSTNT" in render_files(spec)["rules/gpumon.rules.yaml"]


def test_cli_renders_an_uncatalogued_field_with_a_warning(tmp_path):
    spec = tmp_path / "gpumon.yaml"
    spec.write_text(SPEC.replace("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_MY_CUSTOM_FIELD"))
    proc = subprocess.run([str(Path(sys.executable).parent / "gpumon"), "render", str(spec), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "metrics[1].name: warning: 'DCGM_FI_PROF_MY_CUSTOM_FIELD' is not in gpumon's DCGM field catalogue" in proc.stderr
    assert (tmp_path / "out" / "rules" / "gpumon.rules.yaml").is_file()


def test_a_spec_with_errors_still_shows_the_field_warning(tmp_path):
    """An uncatalogued name is often the typo behind an error elsewhere: the warning is printed with
    the errors, in file order, not only once they are fixed."""
    spec = tmp_path / "gpumon.yaml"
    spec.write_text(SPEC.replace("POWER_USAGE_INSTANT", "POWER_USAGE_INSTNT").replace("unit: watts", "unit: wats", 1))
    proc = subprocess.run([str(Path(sys.executable).parent / "gpumon"), "render", str(spec), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and not (tmp_path / "out").exists()
    lines = [ln.replace(str(spec), "gpumon.yaml") for ln in proc.stderr.splitlines()]
    warning = next(i for i, ln in enumerate(lines) if "warning: 'DCGM_FI_DEV_POWER_USAGE_INSTNT'" in ln)
    error = next(i for i, ln in enumerate(lines) if "'wats' is not one of" in ln)
    assert lines[warning].startswith("gpumon.yaml:13:11: metrics[2].name:") and warning < error
    assert lines[-1] == "gpumon: 1 problem(s) in the spec and 1 warning(s)"


@pytest.mark.skipif(not (Path(DCGM_GIT).is_dir() and Path(EXPORTER_REF, "history").is_dir()
                         and shutil.which("git")), reason="needs a NVIDIA/DCGM clone and dcgm-exporter list copies")
def test_script_regenerates_the_shipped_catalogue():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "field_catalogue.py"), "--dcgm-git", DCGM_GIT,
                           "--exporter-ref", EXPORTER_REF], capture_output=True, text=True, timeout=300, check=True)
    assert proc.stdout == (ROOT / "generator" / "gpumon" / "data" / "dcgm_fields.json").read_text("utf-8")


#: lines 1268-1280 and 596-602 of NVIDIA/DCGM dcgmlib/dcgm_fields.h at v4.6.0 (Apache-2.0): doc comments
#: with two stars and with one, and one whose lines repeat the star
HEADER = """/**
 * Whether remapping of rows is pending
 */
#define DCGM_FI_DEV_ROW_REMAP_PENDING 396

/*
 * NV Link flow control CRC  Error Counter for Lane 0
 */
#define DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_L0_TOTAL 400

/**
 *  * GPM support for the device
 *   */
#define DCGM_FI_DEV_GPM_SUPPORT 94
#define DCGM_FI_DEV_TRAILING 97 /* a comment trailing its own define */
#define DCGM_FI_DEV_UNDOCUMENTED 98
"""


def test_catalogue_descriptions_are_each_fields_own_comment():
    """A one-star comment above a field used to be skipped for the last two-star one, several
    defines back: 149 fields read an earlier field's text with ``#define`` lines in it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import field_catalogue
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    got = {name: doc for name, (_, doc) in field_catalogue.header_fields(HEADER).items()}
    assert got == {"DCGM_FI_DEV_ROW_REMAP_PENDING": "Whether remapping of rows is pending",
                   "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_L0_TOTAL": "NV Link flow control CRC Error Counter for Lane 0",
                   "DCGM_FI_DEV_GPM_SUPPORT": "GPM support for the device",
                   "DCGM_FI_DEV_TRAILING": "", "DCGM_FI_DEV_UNDOCUMENTED": ""}
    shipped = fields.catalogue_document()["fields"]
    assert not [n for n, e in shipped.items() if any(s in e["description"] for s in ("#define", "/*", "*/"))]


def test_a_metric_without_a_title_is_named_by_its_fields_help():
    """The title panels and alert texts show: the spec's own, else the field's help without its unit
    note, else (no help, a sentence, a description cut short) the name the alerts derive."""
    spec = parse_spec(SPEC + """\
  - name: DCGM_FI_DEV_CLOCKS_AUTOBOOST_MODE
    kind: gauge
    unit: none
    presence: optional
  - name: DCGM_FI_DEV_FB_USED
    kind: gauge
    unit: MiB
    presence: optional
    title: Memory in use
""", "spec.yaml")
    titles = {m.name: m.title for m in spec.metrics}
    assert titles["DCGM_FI_DEV_GPU_TEMP"] == "GPU temperature"  # help: "GPU temperature (in C)."
    # help: "Current instantaneous power usage of the device in Watts"
    assert titles["DCGM_FI_DEV_POWER_USAGE_INSTANT"] == "Current instantaneous power usage of the device"
    assert titles["DCGM_FI_DEV_FB_USED"] == "Memory in use"
    # DCGM's description "Auto-boost for the device (1 = enabled. 0 = disabled)" leaves a parenthesis open
    # once cut at its full stop: the derived name instead
    assert titles["DCGM_FI_DEV_CLOCKS_AUTOBOOST_MODE"] == "ClocksAutoboostMode"
    assert fields.title("NOT_A_FIELD", "NotAField") == "NotAField"
