"""End to end with the real all-MiniLM-L6-v2 model: time travel over a revised policy."""

from __future__ import annotations

import pytest

from smartvector import ModelUnavailableError, SmartVectorStore, Status, make_embedder
from smartvector.embedders import check_available

pytestmark = pytest.mark.model

POLICY_V1 = (
    "Password policy: employees must change their account passwords every 90 days.\n\n"
    "Remote access to the corporate network requires the VPN client and a hardware token.\n\n"
    "Company laptops must use full disk encryption at all times."
)
POLICY_V2 = POLICY_V1.replace("every 90 days", "every 60 days")
QUESTION = "How often do passwords have to be changed?"


@pytest.fixture(scope="module")
def store() -> SmartVectorStore:
    try:
        check_available()
    except ModelUnavailableError as e:
        pytest.skip(str(e))
    s = SmartVectorStore(make_embedder("minilm"), "exact")
    s.add_document("pw", POLICY_V1, "2024-01-01", source_type="policy_doc")
    s.add_document("handbook", "The cafeteria serves lunch from noon until two o'clock.",
                   "2024-01-01", source_type="wiki")
    s.consolidate("2024-01-02")
    report = s.add_document("pw", POLICY_V2, "2024-06-01", source_type="policy_doc")
    assert report.n_reembedded == 1 and report.deprecated == ["pw@v1#0"]
    s.consolidate("2024-06-02")
    return s


def test_minilm_is_a_real_model(store):
    emb = store.embedder
    # the default backend (OpenVINO) caches under its own identity; torch is the reference
    assert emb.name.startswith("all-MiniLM-L6-v2") and emb.dim == 384
    v = store.get("pw@v2#0").embedding
    assert abs(float(v @ v) - 1.0) < 1e-5


def test_after_the_revision_the_60_day_chunk_comes_first(store):
    hits = store.query(QUESTION, "2024-07-01", k=3, record_access=False)
    assert hits[0].vector_id == "pw@v2#0"
    assert "every 60 days" in hits[0].content
    assert all("every 90 days" not in h.content for h in hits)
    assert hits[0].status == Status.ACTIVE
    # the answer is found by meaning: the password chunk is semantically closest
    assert hits[0].semantic == max(h.semantic for h in hits)


def test_before_the_revision_the_90_day_chunk_comes_first(store):
    hits = store.query(QUESTION, "2024-03-01", k=3, record_access=False)
    assert hits[0].vector_id == "pw@v1#0"
    assert "every 90 days" in hits[0].content
    assert all("every 60 days" not in h.content for h in hits)


def test_stale_chunk_loses_even_when_allowed_to_compete(store):
    hits = store.query(QUESTION, "2024-07-01", k=5, lifecycle=False, record_access=False)
    ids = [h.vector_id for h in hits]
    assert ids.index("pw@v2#0") < ids.index("pw@v1#0")
