"""``manage.py grant_validation USERNAME``: let a user start validation runs
(permission ``validator.add_validationrun``)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Grant validator.add_validationrun to a user."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--revoke", action="store_true")

    def handle(self, *args, username, revoke, **o):
        User = get_user_model()
        try:
            user = User.objects.get(username=username)
        except User.DoesNotExist:
            raise CommandError(f"no user {username!r} (create one with createsuperuser)", returncode=2) from None
        perm = Permission.objects.get(content_type__app_label="validator", codename="add_validationrun")
        (user.user_permissions.remove if revoke else user.user_permissions.add)(perm)
        self.stdout.write(f"{'revoked' if revoke else 'granted'} validator.add_validationrun for {username}")
