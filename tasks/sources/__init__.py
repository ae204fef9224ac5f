"""Source readers: real on-disk dataset formats -> images / objects / relations / attributes shards.

Sources (registered through the ``reasonvqa.sources`` entry points): ``vg.VgSource`` (Visual
Genome), ``gldv2.Gldv2Source`` (Google Landmarks v2). ``ingest.SourcesStage`` (in a build) and
``ingest.ingest_unit`` write one work unit of any source; ``scan.scan_source`` reads a source into a temporary folder and summarizes it.
"""
