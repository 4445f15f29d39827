"""egg bench --ray: a suite's tasks as Ray tasks, one per task, each on the node Ray picks.

`egg bench` starts `python -m egg_ray JOB.json` (the driver, driver.py) and reads its events, one JSON line each, on
stdout. The driver submits one Ray task per suite task (task.py): on its node it runs the node's own egg on that
one task (`egg ... bench ... --ray-task FILE`), which prints the task's row, and sends back the row, the task's
files and the task's SQLite store. A task whose node or worker dies is run again elsewhere, at most `retries`
times; its row says where it ran and what failed (`row["ray"]`). Only this package imports ray.
"""
