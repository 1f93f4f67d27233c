"""What users import comes from the package root (issue 37): the saver, the effect helpers,
the shared saver and the effect errors, the same objects as their modules'."""

from __future__ import annotations


def test_the_root_exports_the_saver_the_effect_helpers_and_their_errors() -> None:
    import langgraph_durable
    from langgraph_durable import (
        DurableSaver,
        EffectCheckpointError,
        EffectFailedError,
        EffectInDoubtError,
        SharedSaver,
        aonce,
        effects,
        errors,
        idempotency_key,
        once,
        saver,
        shared,
    )

    assert (once, aonce, idempotency_key) == (effects.once, effects.aonce,
                                              effects.idempotency_key)
    assert (DurableSaver, SharedSaver) == (saver.DurableSaver, shared.SharedSaver)
    assert (EffectCheckpointError, EffectFailedError, EffectInDoubtError) == (
        errors.EffectCheckpointError, errors.EffectFailedError, errors.EffectInDoubtError)
    assert {"once", "aonce", "idempotency_key", "SharedSaver", "EffectCheckpointError",
            "EffectFailedError", "EffectInDoubtError"} <= set(langgraph_durable.__all__)
    assert all(hasattr(langgraph_durable, name) for name in langgraph_durable.__all__)
