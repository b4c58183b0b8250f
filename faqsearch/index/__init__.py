"""The index format and the index directory: the names of its files and the typed config
(``format.py``), reading and checking a version's config and files (``config.py``), the directory
with its versions, lock and commit (``directory.py``), the versions kept and restored
(``versions.py``), and a frozen view of one committed version (``snapshot.py``)."""
