"""The index format and the index directory: the names of its files (``format.py``), a version's config (``config.py``), the directory with its
versions, lock and commit (``directory.py``), the versions kept and restored (``versions.py``), and a
frozen view of one committed version (``snapshot.py``)."""
