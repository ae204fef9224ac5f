"""The refresh period of a live SPARQL endpoint: which facts a build may reuse and which it fetches again.

A build at moment ``as_of`` belongs to the period ``floor(as_of / refresh)`` (UTC, counted from the
epoch). The period names the knowledge snapshot and keys the query cache, so every build of one period
reuses the facts its first build fetched, and the first build of the next period fetches them again.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_refresh(text: str) -> timedelta:
    """``"1d"``, ``"12h"``, ``"30m"`` as a timedelta (ValueError for anything else)."""
    unit = _UNITS.get(text[-1:]) if text else None
    if unit is None or not text[:-1].isdigit() or int(text[:-1]) == 0:
        raise ValueError(f"refresh period {text!r}: give a positive whole number and a unit m, h or d, e.g. 1d")
    return timedelta(**{unit: int(text[:-1])})


def period_start(as_of: datetime, refresh: timedelta) -> datetime:
    """Start (UTC) of the refresh period holding ``as_of``; a naive ``as_of`` is taken as UTC."""
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=timezone.utc)
    elapsed = as_of.astimezone(timezone.utc) - _EPOCH
    return _EPOCH + (elapsed // refresh) * refresh


def period_label(as_of: datetime, refresh: str) -> str:
    """The period as text: ``YYYY-MM-DD`` for whole-day periods, else ``YYYY-MM-DDTHH:MMZ``."""
    length = parse_refresh(refresh)
    start = period_start(as_of, length)
    return start.strftime("%Y-%m-%d") if length % timedelta(days=1) == timedelta(0) else start.strftime("%Y-%m-%dT%H:%MZ")


def utc_now() -> datetime:
    """The current moment in UTC (the default ``as_of`` of a build)."""
    return datetime.now(timezone.utc)
