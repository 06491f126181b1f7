"""`pytest --nbval notebooks/` tests the notebooks, and only them.

The folder also holds `sample_project/`, whose tests fail on purpose (the agent
fixes a copy of it), and `scratch/`, where the notebooks put those copies: a second
run would collect them too and stop on "import file mismatch". Neither is a test
of phoenix_nb; nor are executed copies (`*.out.ipynb`) a notebook to check.
"""

collect_ignore_glob = ["sample_project", "scratch", "*.out.ipynb", ".ipynb_checkpoints"]
