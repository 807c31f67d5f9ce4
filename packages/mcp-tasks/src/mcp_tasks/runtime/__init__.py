"""The runtime: running task bodies (runner, task context), driving tasks from elsewhere
(control), and waking waiters when a task changes (notifier). Knows Stores, not the wire."""
