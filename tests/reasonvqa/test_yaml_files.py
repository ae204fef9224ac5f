import datetime

import pytest
import yaml

from reasonvqa.yaml_files import load_yaml

DOCUMENT = """
P2048:
  label: height
  domains: [Architecture, Geography]
  units: &m {Q11573: metre}
  again: *m
  since: 2021-05-26
  hops: 3
  scale: 1.5e3
  ok: yes
  none: ~
"""


def test_values_are_those_of_the_safe_loader():
    assert load_yaml(DOCUMENT) == {"P2048": {
        "label": "height", "domains": ["Architecture", "Geography"], "units": {"Q11573": "metre"},
        "again": {"Q11573": "metre"}, "since": datetime.date(2021, 5, 26), "hops": 3, "scale": "1.5e3",
        "ok": True, "none": None}}
    assert load_yaml(DOCUMENT) == yaml.safe_load(DOCUMENT)


def test_a_broken_document_raises_a_yaml_error_and_no_object_is_built():
    with pytest.raises(yaml.YAMLError):
        load_yaml("P9999:\n  label: [unclosed\n")
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']")
