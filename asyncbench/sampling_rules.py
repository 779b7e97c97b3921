"""Sampling parameters an API refuses together, as the real APIs enforce them: one rule,
read by the provider (which does not send what would be refused) and by the simulator
(which refuses it as the real API does).

Anthropic's models from Claude Opus 4.1 on (Opus 4.1, Sonnet 4.5, Haiku 4.5, Opus 4.5 and
newer) take `temperature` or `top_p`, not both: the Messages API answers 400
`{"type": "error", "error": {"type": "invalid_request_error", "message": "`temperature`
and `top_p` cannot both be specified for this model. Please use only one."},
"request_id": "req_..."}`. Sources: Anthropic's "Migrating to Claude 4.5" guide
(platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4, "Update sampling
parameters ... Use only temperature OR top_p, not both", a breaking change from Claude
Sonnet 3.7); the full error body as the API returned it for claude-sonnet-4-5-20250929
(BerriAI/litellm#15097) and in infiniflow/ragflow#11815; Opus 4.1 from
open-webui/pipelines#546 ("Claude 4.1 rejects requests that specify both") and
comet-ml/opik#3728 (4.1 Opus, 4.5 Sonnet, 4.5 Haiku). Claude 3.x and the 4.0 models
(claude-sonnet-4-20250514, claude-opus-4-20250514) take both.
"""

from __future__ import annotations

import re

ANTHROPIC_BOTH_SAMPLERS = ("`temperature` and `top_p` cannot both be specified for this model. "
                           "Please use only one.")
# claude-<family>-<major>[-<minor>][-<date>]: the current naming (claude-sonnet-4-5-20250929,
# claude-haiku-4-5, claude-opus-4-1); the 3.x names (claude-3-7-sonnet-...) put the family last.
_CLAUDE = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-\d{8})?(?:-latest)?$")
ONE_SAMPLER_FROM = (4, 1)  # Claude Opus 4.1 and every later model


def one_sampler_only(model: str) -> bool:
    """Whether an Anthropic model refuses `temperature` and `top_p` in one request."""
    found = _CLAUDE.search(model.strip().lower().rsplit("/", 1)[-1])
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= ONE_SAMPLER_FROM
