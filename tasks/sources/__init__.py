"""Source readers: real on-disk dataset formats -> images / objects / relations / attributes shards.

Entry points: ``vg.ingest_vg`` (Visual Genome), ``gldv2.ingest_gldv2`` (Google Landmarks v2),
``scan.scan_source`` (read a source into a temporary folder and summarize it).
"""
