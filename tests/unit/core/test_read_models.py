"""The read models of list pages (``ServiceSummary``, ``LicenseSummary``): what they carry
of their entity, so a list page shows what the entity holds."""
from dataclasses import fields
from datetime import datetime, timezone

from core.panel.services import Service, ServiceSummary
from core.partner.licenses import License, LicenseSummary

AT = datetime(2026, 11, 27, 4, 0, tzinfo=timezone.utc)


def test_a_license_summary_has_the_fields_of_a_license_in_their_order():
    assert LicenseSummary._fields == tuple(f.name for f in fields(License))
    assert LicenseSummary._field_defaults == {f.name: f.default for f in fields(License)
                                              if f.name in LicenseSummary._field_defaults}


def test_a_license_summary_of_a_license_holds_its_values():
    lic = License(id="lic_1", human_id="L-1", partner_id="p", customer_id="c", contract_id="k",
                  license_service_license_id="ls", key_masked="\u2026abcdef", edition="pro", state="active",
                  issued_at=AT, external_billing_ref="ref", metadata="{}", terminated_at=None)
    summary = LicenseSummary.of(lic)
    assert {name: getattr(summary, name) for name in summary._fields} == {f.name: getattr(lic, f.name)
                                                                          for f in fields(License)}


def test_a_service_summary_holds_the_named_fields_of_its_service():
    names = {f.name for f in fields(Service)}
    assert set(ServiceSummary._fields) <= names
    service = Service(id="svc_1", name="web", customer_id="cus", deploy_method="template", status="running",
                      created_at=AT, updated_at=AT, template_id="nginx", url="https://web.example",
                      variables={"SECRET": "x"}, compose="services: {}")
    summary = ServiceSummary.of(service)
    assert summary._asdict() == {name: getattr(service, name) for name in ServiceSummary._fields}
    assert ServiceSummary._fields[-2:] == ("created_at", "updated_at")  # the repository converts the last two
