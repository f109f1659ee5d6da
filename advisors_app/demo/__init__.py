"""The demo: the Python Language Reference as a knowledge base, chains, tools and checks.

Add ``"advisors_app.demo"`` to ``INSTALLED_APPS`` (after ``"advisors_app"``) for the
``load_demo`` and ``retrieval_check`` commands and the demo tools (``calculator``,
``current_utc_time``, ``python_version``) in the project tool registry. ``load_demo`` is run
by ``manage.py advisors_setup``, hence by ``scripts/demo.sh``.
"""
