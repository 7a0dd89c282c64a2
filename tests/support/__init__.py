"""What the tests share and are not tests: the request helper (``wire``), real-server
wrappers (``helpers.Server``), the apps gunicorn serves (``tests.support.fault_app:app``...),
database servers, fuzz strategies."""
