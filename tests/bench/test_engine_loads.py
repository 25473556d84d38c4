"""bench.engine_loads reads a node's hot threads into one line per thread."""

from __future__ import annotations

from vsparta.bench.engine_loads import hot_frames

HOT = """::: {vsparta-43010}{x}{y}{127.0.0.1}{127.0.0.1:43110}{cdfhilmrstw}
   Hot threads at 2026-11-24T04:05:09.562Z, interval=500ms, busiestThreads=4, ignoreIdleThreads=true:

   93.1% [cpu=93.1%, other=0.0%] (465.4ms out of 500ms) cpu usage by thread 'elasticsearch[es][write][T#1]'
     2/10 snapshots sharing following 31 elements
       app//org.apache.lucene.index.FreqProxTermsWriterPerField.addTerm(FreqProxTermsWriterPerField.java:199)
       app//org.apache.lucene.index.TermsHashPerField.add(TermsHashPerField.java:193)
       java.base@17.0.16/java.lang.Thread.run(Thread.java:840)

   41.0% (205ms out of 500ms) cpu usage by thread 'opensearch[n][refresh][T#2]'
     unique snapshot
       org.apache.lucene.codecs.lucene90.Lucene90DocValuesConsumer.addNumericField(Lucene90DocValuesConsumer.java:9)
"""


def test_hot_frames_one_line_per_thread_with_its_top_methods() -> None:
    assert hot_frames(HOT, top=2) == [
        "93.1% elasticsearch[es][write][T#1]: "
        "org.apache.lucene.index.FreqProxTermsWriterPerField.addTerm <- "
        "org.apache.lucene.index.TermsHashPerField.add",
        "41.0% opensearch[n][refresh][T#2]: "
        "org.apache.lucene.codecs.lucene90.Lucene90DocValuesConsumer.addNumericField",
    ]
