"""What the tests share and are not tests: request helpers, real-server wrappers, the apps
gunicorn serves (``tests.support.fault_app:app``...), database servers, fuzz strategies."""
