"""`sample`: one value of the service's /metrics text, read with the Prometheus client's own
parser, so the tests hold the real text format too."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def sample(metrics_text: str, name: str, **labels: str) -> float:
    """The value of one sample; fails when the text has no such sample."""
    for family in text_string_to_metric_families(metrics_text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name} {labels}")
