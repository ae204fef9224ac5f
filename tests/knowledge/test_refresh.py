from datetime import datetime, timedelta, timezone

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.endpoint import knowledge_date, knowledge_snapshot, source_cache_key
from reasonvqa.knowledge.refresh import parse_refresh, period_label, period_start

UTC = timezone.utc


def test_parse_refresh_units_and_refusals():
    assert parse_refresh("1d") == timedelta(days=1)
    assert parse_refresh("12h") == timedelta(hours=12)
    assert parse_refresh("30m") == timedelta(minutes=30)
    for bad in ("", "d", "0d", "1w", "1.5d", "-1d"):
        with pytest.raises(ValueError, match="refresh period"):
            parse_refresh(bad)


def test_period_start_floors_to_the_period_in_utc():
    assert period_start(datetime(2026, 3, 1, 23, 59, tzinfo=UTC), timedelta(days=1)) == datetime(2026, 3, 1, tzinfo=UTC)
    # 01:30 at UTC+2 is 23:30 the day before in UTC
    plus2 = timezone(timedelta(hours=2))
    assert period_start(datetime(2026, 3, 2, 1, 30, tzinfo=plus2), timedelta(days=1)) == datetime(2026, 3, 1, tzinfo=UTC)
    assert period_start(datetime(2026, 3, 1, 13, 5), timedelta(hours=12)) == datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_period_label_is_a_date_for_whole_days_else_a_minute():
    assert period_label(datetime(2026, 3, 1, 7, tzinfo=UTC), "1d") == "2026-03-01"
    assert period_label(datetime(2026, 3, 4, 7, tzinfo=UTC), "7d") == "2026-02-26"  # 7-day periods counted from 1970
    assert period_label(datetime(2026, 3, 1, 13, 5, tzinfo=UTC), "6h") == "2026-03-01T12:00Z"


def test_endpoint_snapshot_changes_with_the_period_and_keys_the_cache():
    config = KnowledgeConfig(endpoint="https://query.wikidata.org/sparql", refresh="1d")
    morning, night, next_day = (datetime(2026, 3, 1, 2, tzinfo=UTC), datetime(2026, 3, 1, 23, tzinfo=UTC),
                                datetime(2026, 3, 2, 2, tzinfo=UTC))
    assert knowledge_snapshot(config, morning) == "endpoint:https://query.wikidata.org/sparql@2026-03-01"
    assert knowledge_snapshot(config, night) == knowledge_snapshot(config, morning)
    assert knowledge_snapshot(config, next_day) != knowledge_snapshot(config, morning)
    assert source_cache_key(config, next_day) == knowledge_snapshot(config, next_day)
    assert knowledge_date(config, next_day) == "2026-03-02"


def test_mirror_snapshot_ignores_the_clock_and_endpoint_without_refresh_is_undated():
    mirror = KnowledgeConfig()
    assert knowledge_snapshot(mirror, datetime(2020, 1, 1, tzinfo=UTC)) == knowledge_snapshot(mirror, datetime(2030, 1, 1, tzinfo=UTC))
    assert knowledge_snapshot(mirror).startswith("sha256:")
    fixed = KnowledgeConfig(endpoint="https://example.org/sparql", refresh=None)
    assert knowledge_snapshot(fixed) == "endpoint:https://example.org/sparql"
    assert knowledge_date(fixed).startswith("undated")


def test_refresh_setting_is_validated():
    with pytest.raises(ValueError):
        KnowledgeConfig(refresh="1 day")
