"""The web surface: the page's form (a rendering of the request model), thin views, the results fragment's
charts and footnotes. Every number comes from :func:`calculator.plan.make_plan`."""
