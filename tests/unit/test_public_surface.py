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


def test_the_root_exports_what_the_docs_import_from_the_admin_shared_and_metrics_modules(
        ) -> None:
    import langgraph_durable
    from langgraph_durable import metrics, shared
    from langgraph_durable.admin import extref_gc

    for name in ("StorageFootprint", "acollect_saver_garbage", "areferenced_blob_keys",
                 "collect_saver_garbage", "referenced_blob_keys", "storage_footprint"):
        assert getattr(langgraph_durable, name) is getattr(extref_gc, name), name
    assert langgraph_durable.env_saver is shared.env_saver
    assert langgraph_durable.SharedSaverEntry is shared.SharedSaverEntry
    assert langgraph_durable.INSTRUMENTS is metrics.INSTRUMENTS


def test_the_dashboard_package_exports_the_bind_check_without_the_extra() -> None:
    from langgraph_durable import dashboard
    from langgraph_durable.dashboard import security

    assert (dashboard.check_bind, dashboard.new_token) == (security.check_bind,
                                                           security.new_token)
    assert dashboard.__all__ == ["check_bind", "create_app", "new_token", "serve"]


def test_the_root_names_are_sorted() -> None:
    import langgraph_durable

    assert langgraph_durable.__all__ == sorted(langgraph_durable.__all__)
