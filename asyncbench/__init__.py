"""asyncbench: long-context LLM evaluation through APIs.

Data flows one way: benchmark -> Sample -> prompt builder -> Request -> cache/scheduler
-> provider -> Response -> store -> scorer -> aggregate -> estimators -> report.
"""

__version__ = "0.1.0"
