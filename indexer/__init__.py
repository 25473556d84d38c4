"""The batch indexing job: images in, weighted-term documents out, on GPU or CPU.

Stages, one module each (clip-retrieval style):

- ``reader``: input -> ordered work items with stable ids (a manifest's ``id``; for a folder,
  ``sha1`` of the file's path relative to the folder, POSIX separators, 40 hex digits).
  Metadata: ``image`` (path relative to ``image_root``), ``image_root`` (absolute folder the
  service serves from), ``file_version`` (the file's size and modification time: ``--resume``
  writes a changed file again), manifest ``captions`` and ``metadata`` keys.
- ``decoder``: files -> uint8 pictures (one array per chunk; JPEGs in draft mode) in ``spawn``
  worker processes (``DecodePool``), a bounded window ahead; built with the encoder's
  preprocessing. ``gpu_decode``: plain JPEGs with nvJPEG on CUDA, the CPU as the per-file
  fallback, both inside the decode stage.
- ``mapper``: decoded batches -> top-n terms on the device, one host copy per batch as CSR arrays
  (``batch.TermBatch``), one batch in flight (main thread); it never decodes. ``fake``:
  ``--fake-encoder``.
- ``writer``: a thread committing each batch to the job's sinks (``TermIndex.upsert_arrays`` on
  the engine, then the JSONL export), bounded queue.
- ``stages``: each stage as a builder (``Stages``: reader, encoder, decoder, writer), so any one
  can be swapped; ``config``: ``IndexConfig``, with the backend as a parsed ``BackendSpec``.
- ``runner``: wiring, ``--shard``/``--num-shards`` (sha1 of the id), ``--resume`` (skip ids the
  engine, and the export if any, already hold as the input gives them; write changed files
  again), SIGINT/SIGTERM, progress and summary.

Crash safety: a document counts as done only once the engine returned from ``upsert`` (and the
export line was flushed), ids are stable and writes are upserts, so after ``kill -9`` a rerun
with ``--resume`` redoes exactly what was not committed, and overlaps are harmless.
"""
