"""faqsearch inside the frameworks bots are built with, each behind its own extra:
``faqsearch.integrations.langchain.FAQSearchRetriever`` (``pip install 'faqsearch[langchain]'``).
Importing this package imports no framework."""
