"""`gpumon init`: the starter spec loads, renders, and never carries the bundled spec's relative
runbook base (a dead link in every Alertmanager notification once the starter is copied)."""

from __future__ import annotations

import yaml

from gpumon import starter
from gpumon.spec import load_spec

from .clirun import gpumon
from .conftest import ROOT


def test_bundled_spec_is_relative_so_the_starter_has_something_to_replace():
    alerts = yaml.safe_load((ROOT / "gpumon.yaml").read_text())["alerts"]
    assert alerts["runbook_url"] == "../runbooks" and alerts["runbook_url_relative"] is True


def test_starter_without_url_has_no_runbook_links(tmp_path):
    proc = gpumon("init", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.safe_load((tmp_path / "gpumon.yaml").read_text())
    assert "runbook_url" not in doc["alerts"] and "runbook_url_relative" not in doc["alerts"]
    assert "# runbook_url: https://" in (tmp_path / "gpumon.yaml").read_text()
    # everything else of the bundled spec is kept
    bundled = yaml.safe_load((ROOT / "gpumon.yaml").read_text())
    del bundled["alerts"]["runbook_url"], bundled["alerts"]["runbook_url_relative"]
    assert doc == bundled
    spec = load_spec(tmp_path / "gpumon.yaml")
    assert spec.alerts.runbook_url == ""
    proc = gpumon("render", "gpumon.yaml", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "runbook_url" not in (tmp_path / "out" / "rules" / "gpumon.rules.yaml").read_text()
    assert (tmp_path / "out" / "runbooks").is_dir()


def test_starter_with_url_links_every_alert_absolutely(tmp_path):
    base = 'https://git.example/acme/gitops/blob/main/"mon"/'
    proc = gpumon("init", str(tmp_path), "--runbook-url", base, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert load_spec(tmp_path / "gpumon.yaml").alerts.runbook_url == base.rstrip("/")
    assert gpumon("render", "gpumon.yaml", "-o", "out", cwd=tmp_path).returncode == 0
    rules = yaml.safe_load((tmp_path / "out" / "rules" / "gpumon.rules.yaml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and all(r["annotations"]["runbook_url"] == f"{base.rstrip('/')}/{r['alert']}.md" for r in alerts)


def test_relative_or_odd_url_is_refused_and_nothing_is_written(tmp_path):
    for url in ("../runbooks", "runbooks", "ftp://host/runbooks", "https://", "http://[::1/runbooks"):
        proc = gpumon("init", str(tmp_path), "--runbook-url", url, cwd=tmp_path)
        assert proc.returncode == 2 and "absolute http(s) URL" in proc.stderr, (url, proc.stderr)
        assert not list(tmp_path.iterdir())


def test_starter_header_speaks_of_the_users_own_file():
    """The starter is the user's copy: its header does not call it the bundled spec or send the user
    to `gpumon init`, which wrote it."""
    text = starter.starter_spec()
    head = text.split("\nversion:", 1)[0]
    assert text.startswith(starter.MODELINE + "\n#\n# Your gpumon spec, written by `gpumon init`"), head
    assert "run `gpumon init`" not in head and "bundled default spec" not in head, head
    assert "run `gpumon init`" in starter.default_spec_path().read_text().split("\nversion:", 1)[0]


def test_init_refuses_to_overwrite_and_says_which_file(tmp_path):
    """Without --force, an existing file is named with the verb agreeing (one file: "exists")."""
    from gpumon.starter import InitError, write

    (tmp_path / "gpumon.yaml").write_text("mine\n")
    try:
        write(tmp_path)
    except InitError as exc:
        assert str(exc).startswith(f"{tmp_path / 'gpumon.yaml'} exists already; pass --force"), exc
    else:
        raise AssertionError("init overwrote a file without --force")
    assert (tmp_path / "gpumon.yaml").read_text() == "mine\n"
