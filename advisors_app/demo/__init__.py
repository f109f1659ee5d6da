"""The demo: the Python Language Reference as a knowledge base, chains, tools and checks.

Add ``"advisors_app.demo"`` to ``INSTALLED_APPS`` (after ``"advisors_app"``) for the
``load_demo`` and ``retrieval_check`` commands, the demo tools (``calculator``,
``current_utc_time``, ``python_version``, ``save_note``, ``list_notes``) in the project tool
registry and the ``DemoNote`` model (``migrate`` creates its table). ``load_demo`` is run
by ``manage.py advisors_setup``, hence by ``scripts/demo.sh``.
"""
