"""Storage-and-search backends.

The engine reads through two small faces, the same for every backend:

* a vector index (``VectorIndex`` for the embedded backend): ``search(vectors, k, ids=None)``,
  ``reconstruct(ids)``, ``max_id()``, ``len()``, ``dim``, ``factory``, ``supports_removal``;
* a store (``Store``): ``questions(ids)``, ``lexical(texts, n, filters)``, ``question_ids(filters)``,
  ``faq(id)``, ``list_faqs(...)``, ``faq_hashes()``, ``faq_ids(source)``, ``all_questions()``,
  ``counts()``, ``question_count()``, ``source_counts()``, ``close()``.

Writes (build, edits, refit) are the engine's, per backend: ``embedded`` (FAISS + SQLite files in
the versioned index directory, the default) and ``milvus`` (faqsearch.backends.milvus: rows in a
Milvus collection, config and transform in the index directory).
"""
from __future__ import annotations

BACKENDS = ("embedded", "milvus")
